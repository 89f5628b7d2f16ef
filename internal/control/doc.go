// Package control is the apply-time control plane the provider drives:
// it takes Gateway API and Kubernetes objects (and a gateway's
// gwruntime.Spec) and writes and reads them in the cluster with
// server-side apply under the provider's field manager. Its files go by
// object kind: gateways and their class parameters, the gateway runtime
// and its drift, RBAC, status, the rollout wait, routes' RoutingFragments
// and the served wait, ListenerSets, cache invalidation and the
// varnishgw.dev CRDs. It knows nothing of Terraform: errors are plain Go
// errors wrapped with context, which the provider turns into diagnostics.
package control
