# Terraform 1.12 and later: import a GatewayClass by its identity.
import {
  to = varnishgw_gateway_class.varnish
  identity = {
    name = "varnish"
  }
}
