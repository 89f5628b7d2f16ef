// Package demo runs a varnishgw gateway on one machine the way a cluster
// would, for `make demo` and the end-to-end test.
//
// There is no kubelet, scheduler or controller-manager on the local control
// plane (package testenv), so the package stands in for the parts of a
// cluster that would otherwise run the gateway:
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
// Backends listen on the machine's first non-loopback IPv4 address
// (HostIP): the API server refuses loopback addresses in EndpointSlices.
package demo
