# HTTPRoutes are namespaced: import one by namespace/name.
terraform import varnishgw_http_route.shop shop/shop
