# Terraform 1.12 and later: import an HTTPRoute by its identity.
import {
  to = varnishgw_http_route.shop
  identity = {
    namespace = "shop"
    name      = "shop"
  }
}
