# Empties the cache of the Gateway "public" (namespace "gateways") of what a
# release changed, on every pod of the gateway, each time var.release
# changes: the home page, one search URL, every asset of the old version,
# the API's item lists and every page tagged product-42 by its origin.
variable "release" {
  type = string
}

resource "varnishgw_cache_invalidation" "release" {
  gateway_namespace = "gateways"
  gateway_name      = "public"

  # Purge a URL: every cached query of "/" ...
  purge {
    host = "www.example.com"
    path = "/"
  }
  # ... or exactly one URL with its query.
  purge {
    host  = "www.example.com"
    path  = "/search"
    query = "q=shoes"
  }

  # Ban by path prefix, or by regular expression.
  ban {
    host        = "www.example.com"
    path_prefix = "/assets/"
  }
  ban {
    host       = "api.example.com"
    path_regex = "^/v[0-9]+/items$"
  }

  # Every object whose response listed this tag in Cache-Tag.
  tags = ["product-42"]

  # A new release replaces the resource: the invalidation runs again.
  triggers = {
    release = var.release
  }
}

# The pods that applied it.
output "invalidated_on" {
  value = varnishgw_cache_invalidation.release.applied_pods
}
