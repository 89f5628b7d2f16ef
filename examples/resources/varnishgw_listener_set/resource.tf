# The gateway admits the ListenerSets of its own namespace.
resource "varnishgw_gateway" "public" {
  namespace          = "gateways"
  name               = "public"
  gateway_class_name = "varnish"

  listener {
    name = "http"
    port = 80
  }

  allowed_listeners {
    namespaces = "Same"
  }
}

# A team adds a listener on a port of its own: the gateway's Service gets
# port 8081 and varnishd listens on it.
resource "varnishgw_listener_set" "shop" {
  namespace = "gateways"
  name      = "shop"

  parent_ref {
    name = varnishgw_gateway.public.name
  }

  listener {
    name     = "shop"
    port     = 8081
    hostname = "shop.example.com"
    allowed_routes {
      namespaces = "All"
    }
  }
}

# A route attached to the ListenerSet serves on its listener only.
resource "varnishgw_http_route" "shop" {
  namespace = "shop"
  name      = "shop"

  parent_ref {
    kind      = "ListenerSet"
    namespace = varnishgw_listener_set.shop.namespace
    name      = varnishgw_listener_set.shop.name
  }

  rule {
    backend_ref {
      name = "shop"
      port = 80
    }
  }
}
