# Gateways are namespaced: import one by namespace/name.
terraform import varnishgw_gateway.public gateways/public
