# The merged routing of the Gateway "public" in the namespace "gateways",
# as its chaperone will serve it. In a configuration that also declares the
# routes, add depends_on = [varnishgw_http_route.shop, ...] so that it is
# read after they are applied.
data "varnishgw_routing" "public" {
  namespace = "gateways"
  name      = "public"
}

# Fail the run when the routing has conflicts or an unreadable fragment.
check "public_routing" {
  assert {
    condition = data.varnishgw_routing.public.valid && length(data.varnishgw_routing.public.conflicts) == 0
    error_message = join("\n", concat(
      [for c in data.varnishgw_routing.public.conflicts : "${c.route}: ${c.message}"],
      [for r in data.varnishgw_routing.public.rejected_fragments : "${r.fragment}: ${r.reason}"],
    ))
  }
}

# Which route serves which path, per host, in the order ghost tries them.
output "public_routes" {
  value = {
    for v in data.varnishgw_routing.public.vhosts :
    v.hostname => [for r in v.routes : "${r.path_type} ${r.path_value} -> ${r.route}"]
  }
}

# The ghost.json document the chaperone writes, for debugging.
output "public_ghost_json" {
  value = data.varnishgw_routing.public.ghost_json
}
