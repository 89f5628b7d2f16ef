# Terraform 1.12 and later: import a Gateway by its identity.
import {
  to = varnishgw_gateway.public
  identity = {
    namespace = "gateways"
    name      = "public"
  }
}
