# ListenerSets are namespaced: import one by namespace/name.
terraform import varnishgw_listener_set.shop gateways/shop
