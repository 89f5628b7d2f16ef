# GatewayClasses are cluster-scoped: import one by its name.
terraform import varnishgw_gateway_class.varnish varnish
