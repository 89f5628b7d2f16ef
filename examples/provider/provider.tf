# Use a kubeconfig file and context, as kubectl does.
provider "varnishgw" {
  config_path    = "~/.kube/config"
  config_context = "production"
}
