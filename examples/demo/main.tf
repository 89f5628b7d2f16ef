# The gateway of `make demo`: a class, a gateway with an HTTP and an HTTPS
# listener and routes that show host routing, a path plus header match, a
# redirect and a 90/10 weighted split. The demo creates the backend Services
# (web, api, api-canary, api-beta) and the certificate Secret demo-tls
# (issued by a CA it makes for the run) in var.namespace before it applies
# this, and sets image, replicas and wait_for_rollout when the gateway runs
# as real pods.

terraform {
  required_providers {
    varnishgw = {
      source = "varnishgw/varnishgw"
    }
  }
}

variable "kubeconfig" {
  description = "Path of the kubeconfig of the cluster to write to."
  type        = string
}

variable "namespace" {
  description = "Namespace of the gateway, its routes and the backend Services."
  type        = string
  default     = "demo"
}

variable "port" {
  description = "Port of the gateway's HTTP listener."
  type        = number
  default     = 8080
}

variable "https_port" {
  description = "Port of the gateway's HTTPS listener."
  type        = number
  default     = 8443
}

variable "image" {
  description = "The gateway image, as make image names it (bin/images/gateway.json)."
  type        = string
  default     = "localhost/varnishgw/gateway:dev"
}

variable "replicas" {
  description = "Number of gateway pods."
  type        = number
  default     = 1
}

variable "wait_for_rollout" {
  description = "Wait until the gateway's pods are Ready. The demo sets it on its node; in host mode there is no kubelet to run pods."
  type        = bool
  default     = false
}

provider "varnishgw" {
  config_path = var.kubeconfig
}

resource "varnishgw_gateway_class" "demo" {
  name                 = "varnishgw-demo"
  description          = "The varnishgw demo"
  parameters_namespace = var.namespace
  image                = var.image
}

resource "varnishgw_gateway" "demo" {
  namespace          = var.namespace
  name               = "demo"
  gateway_class_name = varnishgw_gateway_class.demo.name

  listener {
    name     = "http"
    port     = var.port
    protocol = "HTTP"
  }

  # TLS terminated in the gateway pods with the certificate of the Secret
  # demo-tls (type kubernetes.io/tls); only the reference is in the state.
  listener {
    name     = "https"
    port     = var.https_port
    protocol = "HTTPS"
    tls {
      certificate_ref {
        name = "demo-tls"
      }
    }
  }

  replicas         = var.replicas
  wait_for_rollout = var.wait_for_rollout
}

# Host routing: www.demo.local goes to web, with a redirect of an old path.
resource "varnishgw_http_route" "www" {
  namespace = var.namespace
  name      = "www"
  hostnames = ["www.demo.local"]

  parent_ref {
    name = varnishgw_gateway.demo.name
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

  rule {
    backend_ref {
      name = "web"
      port = 80
    }
  }
}

# api.demo.local: beta testers (header x-beta: 1) on /v2 reach api-beta;
# everyone else is split 90/10 between the stable and the canary release.
resource "varnishgw_http_route" "api" {
  namespace = var.namespace
  name      = "api"
  hostnames = ["api.demo.local"]

  parent_ref {
    name = varnishgw_gateway.demo.name
  }

  rule {
    match {
      path {
        type  = "PathPrefix"
        value = "/v2"
      }
      header {
        name  = "x-beta"
        value = "1"
      }
    }
    backend_ref {
      name = "api-beta"
      port = 80
    }
  }

  rule {
    backend_ref {
      name   = "api"
      port   = 80
      weight = 90
    }
    backend_ref {
      name   = "api-canary"
      port   = 80
      weight = 10
    }
  }
}

output "gateway" {
  description = "The gateway's namespace/name."
  value       = "${varnishgw_gateway.demo.namespace}/${varnishgw_gateway.demo.name}"
}
