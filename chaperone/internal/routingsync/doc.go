// Package routingsync is the routing half of the chaperone: it keeps ghost's
// ghost.json in step with the routing state of one Gateway.
//
// A Source (KubeSource for a cluster, DirSource for a plain directory)
// watches the Gateway, its routing fragments and the Services,
// EndpointSlices and ReferenceGrants the fragments reference, and tells the
// Syncer when anything changed. The Syncer debounces the changes, builds the
// document with the routing core (routing.Merge, routing.Resolve,
// ghostjson.Encode), writes it atomically when its bytes changed and asks
// ghost to reload it over the loopback admin socket. A document that ghost
// rejects is never left on disk: the last good file is restored, so that a
// restarted varnishd child loads good routing.
//
// See design/routing-sync.md.
package routingsync
