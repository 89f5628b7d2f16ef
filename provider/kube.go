package provider

import (
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
)

// requireClients reports an error when the provider has no API client,
// which happens when its configuration depended on unknown values.
func requireClients(c *clients, diags *diag.Diagnostics) bool {
	if c != nil {
		return true
	}
	diags.AddError("Reach the Kubernetes API",
		"The provider has no Kubernetes client: its configuration was not known when this operation ran. "+
			"Apply the resources the provider configuration depends on first (terraform apply -target=...), then apply again.")
	return false
}

// configureClients takes the provider's clients from a resource's
// ConfigureRequest data. Nil data (the provider is not configured yet) gives
// nil without an error; requireClients reports it when an operation needs it.
func configureClients(data any, diags *diag.Diagnostics) *clients {
	if data == nil {
		return nil
	}
	c, ok := data.(*clients)
	if !ok {
		diags.AddError("Configure the resource", fmt.Sprintf("unexpected provider data %T; this is a bug in the provider", data))
	}
	return c
}
