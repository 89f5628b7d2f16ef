# Routes for shop.example.com on the Gateway "public" in the namespace
# "gateways" (its GatewayClass is served by varnishgw).
resource "varnishgw_http_route" "shop" {
  namespace = "shop"
  name      = "shop"

  parent_refs = [{
    name      = "public"
    namespace = "gateways"
  }]

  # Host routing: only requests for this host use the rules below.
  hostnames = ["shop.example.com"]

  rules = [
    {
      # Path and header match: beta testers' API requests go to api-beta.
      matches = [{
        path    = { type = "PathPrefix", value = "/api" }
        headers = [{ name = "x-beta", value = "1" }]
      }]
      backend_refs = [{ name = "api-beta", port = 8080 }]
    },
    {
      # A 90/10 weighted split between the stable and the canary release.
      matches = [{ path = { type = "PathPrefix", value = "/api" } }]
      backend_refs = [
        { name = "api", port = 8080, weight = 90 },
        { name = "api-canary", port = 8080, weight = 10 },
      ]
      timeouts = { request = "10s" }
    },
    {
      # A permanent redirect of the old catalogue to the new one.
      matches = [{ path = { type = "Exact", value = "/catalog" } }]
      filters = [{
        type = "RequestRedirect"
        request_redirect = {
          path        = { type = "ReplaceFullPath", replace_full_path = "/products" }
          status_code = 301
        }
      }]
    },
    {
      # Everything else goes to the web front end, with a response header.
      backend_refs = [{ name = "web", port = 80 }]
      filters = [{
        type                     = "ResponseHeaderModifier"
        response_header_modifier = { set = [{ name = "x-served-by", value = "varnishgw" }] }
      }]
    },
  ]
}
