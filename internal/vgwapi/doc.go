// Package vgwapi is varnishgw's own Kubernetes API, group varnishgw.dev:
// the namespaced resources through which the provider and the gateway pods
// talk, their CustomResourceDefinitions, and the code both sides use to
// write and read them.
//
//   - RoutingFragment: what one HTTPRoute contributes to one Gateway
//     (routing.Fragment), in the Gateway's namespace. Only the provider
//     writes fragments; the gateway pods read them. A resource type of its
//     own, instead of labelled ConfigMaps, lets RBAC grant it separately:
//     the built-in admin and edit roles do not include it, so writing
//     ConfigMaps in a gateway's namespace no longer changes its routing,
//     and the gateway's identity reads fragments without reading the
//     namespace's ConfigMaps.
//   - GatewayPodReport: what one gateway pod serves, written only by that
//     pod (server-side apply, one field manager) and owned by the Pod, so
//     Kubernetes deletes it with the pod. Its routing part says up to which
//     RoutingFragment resource version the served routing includes every
//     fragment, and which fragments the pod rejected and why; that is how
//     the provider knows an apply is served. Its invalidations part
//     acknowledges CacheInvalidations, written by another field manager.
//     Later reports (certificates) go in further parts of the same object.
//   - CacheInvalidation: one invalidation of a Gateway's cache (purges,
//     bans, tags), labelled for the Gateway like fragments; every pod of
//     the Gateway applies it once and acknowledges it in its report
//     (WaitAcknowledged waits for the Ready pods).
//
// The provider installs and updates the CRDs (EnsureCRDs) and never deletes
// them. ReadFragments reads a Gateway's fragments for the chaperone and for
// the provider's data sources alike.
package vgwapi
