# Terraform 1.14 and later, in a .tfquery.hcl file: terraform query lists the
# HTTPRoutes of namespace shop that a varnishgw gateway serves, each with
# the state an import would give it.
list "varnishgw_http_route" "shop" {
  provider         = varnishgw
  include_resource = true

  config {
    namespace = "shop"
  }
}
