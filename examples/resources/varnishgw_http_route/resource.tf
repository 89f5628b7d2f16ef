# Routes for shop.example.com on the Gateway "public" in the namespace
# "gateways" (its GatewayClass is served by varnishgw).
resource "varnishgw_http_route" "shop" {
  namespace = "shop"
  name      = "shop"

  parent_ref {
    name      = "public"
    namespace = "gateways"
  }

  # Host routing: only requests for this host use the rules below.
  hostnames = ["shop.example.com"]

  # Path and header match: beta testers' API requests go to api-beta.
  rule {
    match {
      path {
        type  = "PathPrefix"
        value = "/api"
      }
      header {
        name  = "x-beta"
        value = "1"
      }
    }
    backend_ref {
      name = "api-beta"
      port = 8080
    }
  }

  # A 90/10 weighted split between the stable and the canary release.
  rule {
    match {
      path {
        type  = "PathPrefix"
        value = "/api"
      }
    }
    backend_ref {
      name   = "api"
      port   = 8080
      weight = 90
    }
    backend_ref {
      name   = "api-canary"
      port   = 8080
      weight = 10
    }
    timeouts {
      request = "10s"
    }
    # The API answers per user: never cached, whatever the Gateway's policy.
    cache {
      enabled = false
    }
  }

  # Static files: cached for a day whatever the origin says, keyed without
  # the query string.
  rule {
    match {
      path {
        type  = "PathPrefix"
        value = "/static"
      }
    }
    backend_ref {
      name = "web"
      port = 80
    }
    cache {
      ttl                      = "24h"
      force_ttl                = true
      query_parameters_include = []
    }
  }

  # A permanent redirect of the old catalogue to the new one.
  rule {
    match {
      path {
        type  = "Exact"
        value = "/catalog"
      }
    }
    filter {
      type = "RequestRedirect"
      request_redirect {
        status_code = 301
        path {
          type              = "ReplaceFullPath"
          replace_full_path = "/products"
        }
      }
    }
  }

  # Everything else goes to the web front end, with a response header.
  rule {
    backend_ref {
      name = "web"
      port = 80
    }
    filter {
      type = "ResponseHeaderModifier"
      response_header_modifier {
        set {
          name  = "x-served-by"
          value = "varnishgw"
        }
      }
    }
  }
}
