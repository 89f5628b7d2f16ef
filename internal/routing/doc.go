// Package routing owns the Gateway API semantics of varnishgw, shared by the
// provider (plan and apply time) and the chaperone (run time), so that what
// `terraform plan` shows is what varnishd does.
//
// The pipeline has four pure steps, none of which calls an API server:
//
//   - ValidateHTTPRoute checks everything varnishgw accepts in an HTTPRoute
//     and names the field, the value and the fix in each error.
//   - Attach binds one HTTPRoute to one Gateway: listeners by sectionName and
//     port, namespace and kind policy, hostname intersection, backend
//     references and ReferenceGrants. It returns a Fragment: the route's
//     contribution to that Gateway plus the status conditions the route must
//     get. Fragments are versioned JSON (MarshalFragment, UnmarshalFragment).
//   - Merge combines all fragments of a Gateway into a Table: vhosts per
//     listener socket with listener isolation, routes in GEP-713 order, and
//     the conflicts it found.
//   - Resolve turns a Table plus Services, EndpointSlices and ReferenceGrants
//     (and, when the Gateway's class allows ExternalName Services, the
//     addresses their DNS names resolved to, which the chaperone looks up)
//     into a ghost.json document (package ghostjson), deterministically.
//
// Cache policies (CachePolicy: a Gateway's default in its
// CachePolicyAnnotation, a rule's own in Rule.Cache) are validated by
// ValidateCachePolicy and merged field by field by EffectiveCache, which
// Resolve uses for ghost.json's cachePolicies and the provider for the plan.
//
// ListenerSets (GEP-1713) add listeners to a Gateway: ComposeGateway gives
// the Gateway with its own listeners and the accepted listeners of the
// ListenerSets its allowedListeners admits (conflicts resolved in the
// Gateway API's precedence and reported per listener), which Attach and
// Merge take; a ListenerSet listener is named by ListenerSetListenerKey.
// A route whose parentRef names a ListenerSet attaches to that
// ListenerSet's listeners only, one naming the Gateway to the Gateway's own.
//
// Listener sockets are named by ghostjson.SocketName; see design/routing.md.
package routing
