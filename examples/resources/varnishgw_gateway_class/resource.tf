resource "varnishgw_gateway_class" "varnish" {
  name        = "varnish"
  description = "Varnish gateways managed by Terraform"

  # No image is published: build one with make image and push it where the
  # cluster pulls from (or import it into the nodes). A tag per build.
  image = "localhost/varnishgw/gateway:dev"

  # The class defaults live in a ConfigMap in this namespace.
  parameters_namespace = "varnishgw-system"

  storage = "malloc,1g"
  varnishd_params = {
    thread_pool_min = "50"
  }

  # Cache anonymous GET and HEAD requests for what the backends allow;
  # without vcl every request is passed.
  vcl = <<-VCL
    sub vcl_recv {
      if ((req.method == "GET" || req.method == "HEAD") && !req.http.Authorization && !req.http.Cookie) {
        return (hash);
      }
    }

    sub vcl_backend_response {
      if (beresp.ttl <= 0s) {
        set beresp.ttl = 10s;
      }
    }
  VCL
}
