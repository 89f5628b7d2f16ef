// Command terraform-provider-varnishgw is the varnishgw Terraform/OpenTofu
// provider: it declares Gateway API gateway classes, gateways and HTTP routes
// served by Varnish, and writes them and each gateway's runtime to Kubernetes.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/varnishgw/terraform-provider-varnishgw/provider"
)

// version is set by the release build (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers like delve")
	flag.Parse()

	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: provider.Address,
		Debug:   debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
