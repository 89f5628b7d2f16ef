# A gateway of the class "varnish" in the namespace "gateways": a Gateway
# with two HTTP listeners and an HTTPS one, two gateway pods behind a
# LoadBalancer Service, a default cache policy for its routes and a little VCL
# of its own.
resource "varnishgw_gateway" "public" {
  namespace          = "gateways"
  name               = "public"
  gateway_class_name = "varnish"

  # Routes from every namespace may attach to the main listener.
  listener {
    name = "http"
    port = 80
    allowed_routes {
      namespaces = "All"
    }
  }

  # Only routes in namespaces labelled team=internal, only for this host.
  listener {
    name     = "internal"
    port     = 8080
    hostname = "internal.example.com"
    allowed_routes {
      namespaces = "Selector"
      selector   = { team = "internal" }
    }
  }

  # HTTPS for www.example.com, terminated in the gateway pods with the
  # certificate of the Secret www-example-com-tls (type kubernetes.io/tls) in
  # the namespace "gateways", for example one cert-manager issues: only the
  # reference is stored, never the key. A Secret that does not exist yet is
  # a plan warning; the listener serves once it exists.
  listener {
    name     = "https"
    port     = 443
    protocol = "HTTPS"
    hostname = "www.example.com"
    tls {
      certificate_ref {
        name = "www-example-com-tls"
      }
    }
    allowed_routes {
      namespaces = "All"
    }
  }

  # The default cache policy of the routes (off without this block): GET and
  # HEAD responses are cached for what their Cache-Control says, 2 minutes
  # when it says nothing, and served up to 30 s stale while they are fetched
  # again. Requests with Authorization or with cookies other than the
  # analytics ones are passed; responses with Set-Cookie are never cached.
  # A route rule's own cache block overrides it argument by argument.
  cache {
    ttl                      = "2m"
    grace                    = "30s"
    query_parameters_exclude = ["utm_source", "utm_medium", "gclid"]
    strip_cookies            = ["_ga", "_gid"]
    status_header            = "X-Cache"
  }

  # Hot-reloaded by the running pods: changing it does not restart them.
  vcl = <<-VCL
    sub vcl_deliver {
      unset resp.http.Via;
    }
  VCL

  replicas            = 2
  service_type        = "LoadBalancer"
  service_annotations = { "service.beta.kubernetes.io/aws-load-balancer-type" = "nlb" }
  # Keep traffic on the node that received it: the client's own address
  # reaches the access log and X-Forwarded-For.
  external_traffic_policy = "Local"
  # A load balancer that connects to the pods itself can send the client's
  # address in the PROXY protocol instead; every listener then requires it,
  # and takes it only from the load balancer's addresses:
  # proxy_protocol         = true
  # proxy_protocol_sources = ["10.0.0.0/16"]
  # Where the nodes allow it (kubelet --allowed-unsafe-sysctls) and the
  # namespace's Pod Security level is privileged, a certificate renewal
  # resets no connection queued on an HTTPS listener:
  # sysctls = { "net.ipv4.tcp_migrate_req" = "1" }
  resources {
    requests = { cpu = "500m", memory = "512Mi" }
    limits   = { memory = "1Gi" }
  }
  rollout_timeout = "5m"

  # Where the pods run: dedicated nodes, spread over the zones.
  pod {
    node_selector = { "example.com/pool" = "edge" }
    affinity = jsonencode({
      podAntiAffinity = {
        preferredDuringSchedulingIgnoredDuringExecution = [{
          weight          = 100
          podAffinityTerm = { topologyKey = "kubernetes.io/hostname", labelSelector = { matchLabels = { "app.kubernetes.io/instance" = "varnishgw-public" } } }
        }]
      }
    })
    annotations = { "prometheus.io/scrape" = "true", "prometheus.io/port" = "9091" }

    toleration {
      key      = "dedicated"
      operator = "Equal"
      value    = "edge"
      effect   = "NoSchedule"
    }

    topology_spread {
      topology_key       = "topology.kubernetes.io/zone"
      max_skew           = 1
      when_unsatisfiable = "ScheduleAnyway"
    }
  }

  # The Gateway's spec.infrastructure: these labels and annotations go on the
  # Gateway and on every object made for it, the pods included.
  infrastructure {
    labels = { "example.com/cost-center" = "web" }
  }
}

output "gateway_addresses" {
  value = varnishgw_gateway.public.addresses
}
