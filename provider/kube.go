package provider

import (
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
)

// applyOptions are the server-side apply options of every write: the
// provider's field manager, taking over fields another manager set.
func applyOptions() metav1.ApplyOptions {
	return metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
}

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

// condition builds a status condition for server-side apply, keeping the
// last transition time of an existing condition whose status is unchanged.
func condition(existing []metav1.Condition, typ string, status metav1.ConditionStatus, reason, message string, generation int64) *metav1apply.ConditionApplyConfiguration {
	transition := metav1.NewTime(time.Now().Truncate(time.Second))
	for _, c := range existing {
		if c.Type == typ && c.Status == status {
			transition = c.LastTransitionTime
		}
	}
	return metav1apply.Condition().
		WithType(typ).
		WithStatus(status).
		WithReason(reason).
		WithMessage(message).
		WithObservedGeneration(generation).
		WithLastTransitionTime(transition)
}
