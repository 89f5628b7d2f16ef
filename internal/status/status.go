// Package status owns what every writer of Gateway API and varnishgw status
// shares: the server-side apply field managers (one per writer, so that no
// writer's apply removes another's fields), the bound on condition messages,
// the condition apply configuration, and the builder of varnishgw's entry
// in a route's status.parents (RouteParent), which the provider's and the
// gateway pods' writers of route status both use.
//
// The architecture guide's "Status: who writes what" names the writer of
// each field.
package status

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
)

// The field managers. A server-side apply removes the fields its manager
// owned and left out, so two writers that write different fields of one
// object must not share a manager.
const (
	// ProviderManager owns every field the provider writes: objects,
	// their status, and the CRDs it installs.
	ProviderManager = "varnishgw"
	// VCLDigestManager owns the Gateway's VCL digest annotation, apart from
	// the Gateway's spec, which the provider's apply of the spec would
	// otherwise have to carry.
	VCLDigestManager = "varnishgw-vcl-digest"
	// ListenerSetListenersManager owns the listener-set-listeners
	// annotation, which the Gateway and every ListenerSet of it write whole,
	// computed from the same objects.
	ListenerSetListenersManager = "varnishgw-listener-sets"

	// ChaperoneManager owns what a gateway pod writes about itself: the
	// Gateway's Programmed condition and the pod's GatewayPodReport.
	ChaperoneManager = "varnishgw-chaperone"
	// ChaperoneTLSManager owns the HTTPS listeners' ResolvedRefs conditions
	// that the pods write (on Gateways and ListenerSets).
	ChaperoneTLSManager = "varnishgw-chaperone-tls"
	// ChaperoneRoutesManager owns what the pods keep true about their
	// routes between applies: the listeners' attachedRoutes and the routes'
	// ResolvedRefs condition.
	ChaperoneRoutesManager = "varnishgw-chaperone-routes"
	// ChaperoneInvalidationsManager owns a GatewayPodReport's
	// status.invalidations, apart from the routing report.
	ChaperoneInvalidationsManager = "varnishgw-chaperone-invalidations"
)

// MaxMessage is the longest condition message the API accepts, in bytes.
const MaxMessage = 32768

// TruncateMessage cuts msg to at most MaxMessage bytes, on a UTF-8
// character boundary, ending in "..." when it was cut.
func TruncateMessage(msg string) string {
	if len(msg) <= MaxMessage {
		return msg
	}
	return strings.ToValidUTF8(msg[:MaxMessage-3], "") + "..."
}

// SetCondition is want as it reads once set among existing by
// meta.SetStatusCondition's rule: lastTransitionTime kept from the existing
// condition of the type when the status does not change, now when it does
// (or want's, when want sets one). existing is not changed.
func SetCondition(existing []metav1.Condition, want metav1.Condition) metav1.Condition {
	conds := slices.Clone(existing)
	meta.SetStatusCondition(&conds, want)
	return *meta.FindStatusCondition(conds, want.Type)
}

// ConditionApply is c as an apply configuration.
func ConditionApply(c metav1.Condition) *metav1apply.ConditionApplyConfiguration {
	return metav1apply.Condition().
		WithType(c.Type).
		WithStatus(c.Status).
		WithReason(c.Reason).
		WithMessage(c.Message).
		WithObservedGeneration(c.ObservedGeneration).
		WithLastTransitionTime(c.LastTransitionTime)
}

// Condition is want set among existing (SetCondition) as an apply
// configuration, with its message truncated to MaxMessage.
func Condition(existing []metav1.Condition, want metav1.Condition) *metav1apply.ConditionApplyConfiguration {
	want.Message = TruncateMessage(want.Message)
	return ConditionApply(SetCondition(existing, want))
}
