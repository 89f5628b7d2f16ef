// Package invalidation is the gateway pods' side of CacheInvalidations and
// the contract of their invalidation endpoint.
//
// The Applier watches the CacheInvalidations of its Gateway, turns each
// into varnishd bans (Bans) once per pod, by UID, and acknowledges it in
// the pod's GatewayPodReport (status.invalidations, written with its own
// server-side apply field manager). An invalidation created before the
// varnishd cache child started has nothing to remove from that child's
// cache: it is acknowledged as skipped, without a ban. The chaperone runs
// it; the provider's tests run it as the pods of a Gateway.
//
// Every ban tests obj.* only (the X-Ghost-* object headers ghost stamps
// on cacheable objects), so varnishd's ban lurker evaluates it in the
// background and bans do not pile up.
//
// Path, Audience, RequestedByAnnotation and Response are the contract of
// the pods' invalidation endpoint (POST /invalidate), which the chaperone
// serves: a caller authenticated with a Kubernetes token, and allowed to
// create CacheInvalidations in the Gateway's namespace, creates one and
// waits until every Ready pod has acknowledged it.
package invalidation
