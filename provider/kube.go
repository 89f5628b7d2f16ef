package provider

import (
	"fmt"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"k8s.io/apimachinery/pkg/api/meta"
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

// condition is want as a status condition for server-side apply, with
// meta.SetStatusCondition's rule for lastTransitionTime: kept from the
// existing condition of the type when the status does not change, now when
// it does (or when want sets one, want's).
func condition(existing []metav1.Condition, want metav1.Condition) *metav1apply.ConditionApplyConfiguration {
	return conditionApply(setCondition(existing, want))
}

// setCondition is want as meta.SetStatusCondition sets it among existing
// (which it does not change).
func setCondition(existing []metav1.Condition, want metav1.Condition) metav1.Condition {
	conds := slices.Clone(existing)
	meta.SetStatusCondition(&conds, want)
	return *meta.FindStatusCondition(conds, want.Type)
}

// conditionApply is the apply configuration of c.
func conditionApply(c metav1.Condition) *metav1apply.ConditionApplyConfiguration {
	return metav1apply.Condition().
		WithType(c.Type).
		WithStatus(c.Status).
		WithReason(c.Reason).
		WithMessage(c.Message).
		WithObservedGeneration(c.ObservedGeneration).
		WithLastTransitionTime(c.LastTransitionTime)
}
