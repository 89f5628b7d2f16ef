package vgwapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The API group and version of varnishgw's resources.
const (
	Group   = "varnishgw.dev"
	Version = "v1alpha1"
)

// GroupVersion is Group and Version as one value.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// Kinds and resources.
const (
	RoutingFragmentKind     = "RoutingFragment"
	RoutingFragmentResource = "routingfragments"

	GatewayPodReportKind     = "GatewayPodReport"
	GatewayPodReportResource = "gatewaypodreports"
)

// RoutingFragments and GatewayPodReports are the resources for dynamic
// clients and informers.
var (
	RoutingFragments  = GroupVersion.WithResource(RoutingFragmentResource)
	GatewayPodReports = GroupVersion.WithResource(GatewayPodReportResource)
)

// FragmentSpec is a RoutingFragment's spec. Fragment holds the
// routing.Fragment JSON (MarshalFragment's output) as an object; Gateway and
// Route repeat who it belongs to for people (kubectl get's columns) and
// must agree with the fragment.
type FragmentSpec struct {
	// Gateway is the name of the Gateway, in the fragment's namespace.
	Gateway string `json:"gateway"`
	// Route is the HTTPRoute as namespace/name.
	Route string `json:"route"`
	// Fragment is the routing.Fragment.
	Fragment map[string]any `json:"fragment"`
}

// GatewayPodReport is what one gateway pod serves. The pod writes the whole
// object with server-side apply.
type GatewayPodReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ReportSpec   `json:"spec"`
	Status            ReportStatus `json:"status,omitempty"`
}

// ReportSpec names the pod and its Gateway.
type ReportSpec struct {
	// Gateway is the name of the Gateway, in the report's namespace.
	Gateway string `json:"gateway"`
	// Pod is the name of the pod (the report's name too).
	Pod string `json:"pod"`
}

// ReportStatus is what the pod serves.
type ReportStatus struct {
	// Routing is the routing the pod serves; nil before its first load.
	Routing *RoutingReport `json:"routing,omitempty"`
	// Invalidations acknowledges the Gateway's CacheInvalidations the pod
	// has handled (applied, skipped or refused), sorted by name; entries
	// of deleted invalidations are pruned. Written by its own field
	// manager (InvalidationFieldManager), apart from Routing.
	Invalidations []InvalidationReport `json:"invalidations,omitempty"`
}

// RoutingReport describes the routing a pod serves.
type RoutingReport struct {
	// FragmentsResourceVersion is the RoutingFragment resource version the
	// pod's view of the fragments had reached when it built the routing it
	// serves: every fragment write of that resource version or earlier is
	// in it (or rejected, below). Compare with
	// k8s.io/apimachinery/pkg/util/resourceversion.CompareResourceVersion.
	FragmentsResourceVersion string `json:"fragmentsResourceVersion"`
	// GatewayGeneration is the generation of the Gateway it was built for.
	GatewayGeneration int64 `json:"gatewayGeneration"`
	// Fragments counts the fragments served.
	Fragments int `json:"fragments"`
	// Rejected lists the fragments the pod could not read, with the
	// resource version it rejected. A rejected fragment's route keeps the
	// routing of its last version the pod accepted, if any.
	Rejected []Rejection `json:"rejected,omitempty"`
	// Time is when the pod loaded this routing.
	Time metav1.Time `json:"time"`
}

// Rejection is a RoutingFragment a reader could not use.
type Rejection struct {
	// Name is the RoutingFragment's name.
	Name string `json:"name"`
	// ResourceVersion is the version that was rejected.
	ResourceVersion string `json:"resourceVersion"`
	// Reason says what is wrong and what to do.
	Reason string `json:"reason"`
	// Kept is the resource version of the fragment's last accepted
	// version that is served instead; empty when none is (the route's
	// hosts then answer 404).
	Kept string `json:"kept,omitempty"`
}
