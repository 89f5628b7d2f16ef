// Package demo runs a varnishgw gateway on one machine, for `make demo`
// (cmd/demo) and the end-to-end tests.
//
// Where the machine can run a test node (package testenv), the gateway runs
// as real pods: LoadImages reads the images `make image` built, DeployEcho
// runs echo backend pods of the echo image behind a Service, and Kubernetes'
// own controllers write the EndpointSlices.
//
// Elsewhere (host mode) the package stands in for the parts of a cluster
// that would run the gateway, with only the control plane (etcd and
// kube-apiserver):
//
//   - backends are small HTTP echo servers (StartBackend) whose addresses
//     are registered as a Service and an EndpointSlice (RegisterService),
//     as the EndpointSlice controller would for ready pods;
//   - the gateway's pod is the chaperone binary started on this machine
//     with the arguments of the chaperone container of the Deployment the
//     provider wrote (StartChaperone), under the gateway ServiceAccount's
//     own token, so the RBAC the provider created is what applies. Only
//     what differs between a pod and a shared machine is overridden: the
//     kubeconfig (in a pod: the mounted token), the work directory and the
//     loopback ports, and the VMOD path (in the image ghost is installed in
//     varnishd's vmod directory; here it is the one built from ghost/).
//
// Host-mode backends listen on the machine's first non-loopback IPv4
// address (HostIP): the API server refuses loopback addresses in
// EndpointSlices. Both kinds of backend answer with package echo's answer.
package demo
