// Package testenv runs a real Kubernetes control plane for tests: etcd and
// kube-apiserver on free loopback ports, RBAC authorization on, the Gateway
// API CRDs installed and served.
//
// One control plane serves a whole test binary. A package opts in with
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// and a test that needs the API server calls [Get], which starts the control
// plane on first use. Tests isolate by namespace ([ControlPlane.Namespace]) and
// act as a ServiceAccount with [ControlPlane.ServiceAccountConfig], so RBAC is
// exercised for real.
//
// The binaries come from the environment that scripts/setup.sh writes to
// bin/tools.env and the GNUmakefile exports: VARNISHGW_ETCD,
// VARNISHGW_KUBE_APISERVER and VARNISHGW_GATEWAY_API_CRDS.
//
// Child processes die with the test binary: they run in their own process
// group with a parent-death signal, and Main stops them on SIGINT and SIGTERM,
// so a failing, panicking or interrupted test leaves no etcd or kube-apiserver
// behind.
package testenv
