# The Gateway "public" in the namespace "gateways": its addresses and
# whether it is programmed.
data "varnishgw_gateway" "public" {
  namespace = "gateways"
  name      = "public"
}

output "public_addresses" {
  value = [for a in data.varnishgw_gateway.public.addresses : a.value]
}

output "public_programmed" {
  value = anytrue([
    for c in data.varnishgw_gateway.public.conditions :
    c.type == "Programmed" && c.status == "True" && c.observed_generation == data.varnishgw_gateway.public.generation
  ])
}

# Routes per listener: from the Gateway status, and counted now from the
# route fragments the gateway's chaperone reads.
output "public_route_counts" {
  value = {
    for l in data.varnishgw_gateway.public.listeners :
    l.name => { status = l.attached_routes, fragments = l.fragment_routes }
  }
}
