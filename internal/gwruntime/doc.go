// Package gwruntime is the contract of a gateway's runtime between the
// provider, which writes it, and the gateway pods, which rely on it: how
// the runtime objects of a Gateway are named and labelled (the
// ServiceAccount, Role, Deployment, Service and VCL ConfigMap, the routes'
// RoutingFragments and backend RoleBindings), the RBAC rules the pods
// get, the chaperone's command line (ChaperoneFlags: the provider
// writes it, the chaperone parses it), and the rendering of those objects
// from a Spec (Deployment, Service, PodDisruptionBudget, ServiceAccount,
// RBAC and the VCL ConfigMap) as the provider applies them. The Gateway API
// semantics live in package routing; this package names and renders things.
package gwruntime
