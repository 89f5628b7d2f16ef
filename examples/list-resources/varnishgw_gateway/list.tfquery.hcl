# Terraform 1.14 and later, in a .tfquery.hcl file: terraform query lists the
# Gateways of namespace gateways that varnishgw serves and that have the
# label team=edge.
list "varnishgw_gateway" "edge" {
  provider = varnishgw

  config {
    namespace      = "gateways"
    label_selector = "team=edge"
  }
}
