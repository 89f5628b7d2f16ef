# Terraform 1.14 and later: invalidate on demand with
#   terraform apply -invoke=action.varnishgw_cache_invalidate.assets
# or after another resource changes (action_trigger below).
action "varnishgw_cache_invalidate" "assets" {
  config {
    gateway_namespace = "gateways"
    gateway_name      = "public"

    ban {
      host        = "www.example.com"
      path_prefix = "/assets/"
    }
  }
}

resource "terraform_data" "release" {
  input = var.release

  lifecycle {
    action_trigger {
      events  = [after_create, after_update]
      actions = [action.varnishgw_cache_invalidate.assets]
    }
  }
}

variable "release" {
  type = string
}
