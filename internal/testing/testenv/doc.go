// Package testenv runs a real Kubernetes control plane for tests, and on
// request a real single-node cluster.
//
// # The control plane (the fast path)
//
// etcd and kube-apiserver on free loopback ports, RBAC authorization on,
// the Gateway API CRDs installed and served. There is no controller,
// scheduler or kubelet: no pod runs, and a deleted namespace stays
// Terminating. It starts in a few seconds and needs no root.
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
// # The node
//
// A package whose tests need pods asks for a node:
//
//	func TestMain(m *testing.M) { testenv.Main(m, testenv.WithNode()) }
//
//	func TestPods(t *testing.T) {
//		node := testenv.GetNode(t) // starts the control plane and the node on first use
//		cp := testenv.Get(t)       // the same control plane, with the node registered
//		names, err := node.ImportImage(ctx, "bin/images/gateway.tar")
//		... create a Deployment and a Service with cp.Client ...
//		pods, err := node.WaitPodsReady(ctx, ns, "app=x", 2)
//		... GET http://POD_IP:PORT/ and http://CLUSTER_IP:PORT/ from the test ...
//		logs, err := node.PodLogs(ctx, ns, pods[0].Name, "container")
//	}
//
// The control plane then runs kube-controller-manager (Deployments,
// ReplicaSets, EndpointSlices, namespace deletion, garbage collection,
// disruption budgets, ServiceAccounts and kube-root-ca.crt) and
// kube-scheduler, and the node runs containerd (with runc and a CNI bridge),
// the kubelet and kube-proxy (iptables mode), all of the API server's
// version. The API server serves on [NodeIP] with a certificate for it and
// for the kubernetes Service's ClusterIP ([KubernetesServiceIP]), so pods
// reach it with their ServiceAccount tokens; `kubectl logs` and `kubectl
// exec` work (the API server has a client certificate the kubelet accepts).
// Pods get addresses in [PodCIDR] and Services in [ServiceCIDR], both in the
// benchmarking block 198.18.0.0/15, which this machine reaches through the
// node's bridge. There is no cluster DNS: pods use this machine's
// /etc/resolv.conf. Images come from archives ([Node.ImportImage]) or from a
// registry: [Node.AllowInsecureRegistry] lets the node pull over plain HTTP
// from one on loopback.
//
// A node needs root, cgroups, containerd, runc and the CNI plugins
// (internal/testing/testenv/debian-packages.txt) and the binaries `make setup`
// builds; [NodeSupported] says whether this machine can run one, and why
// not. On a machine that cannot, [GetNode] fails the test with the reason,
// or skips it when VARNISHGW_SKIP_NODE=1.
//
// One node runs on a machine at a time (iptables chains, cgroups and
// sysctls are machine-wide): a node start waits for the node lock
// (/run/lock/varnishgw-testnode.lock) up to [NodeOptions.LockTimeout], 20
// minutes by default, saying every 30 seconds who holds it, then fails
// naming the holder.
//
// # What a node changes on the machine, and how it is undone
//
// A node keeps what it can in /var/lib/varnishgw-testnode: containerd's
// root, state, socket and registry configuration, runc's state, the
// kubelet's root, pod logs and volume plugin directory, the CNI
// configuration and address leases, certificates, configuration and the
// components' logs. Outside it, a node creates or changes:
//
//   - the bridge varnishgw0 with NodeIP and a route to ServiceCIDR;
//   - the cgroup varnishgw-testnode (the kubelet's cgroup root, holding the
//     pods) in every cgroup hierarchy;
//   - iptables chains and rules, IPv4 and IPv6 (the kubelet's KUBE-FIREWALL
//     and canaries, kube-proxy's KUBE-SERVICES and others);
//   - sysctls: the kubelet's kernel tunables (vm.overcommit_memory,
//     kernel.panic, kernel.panic_on_oops, ...) and net.ipv4.ip_forward (the
//     CNI bridge plugin); kube-proxy is told to leave conntrack and
//     route_localnet alone;
//   - the CNI result cache in /var/lib/cni, containerd's shim sockets in
//     /run/containerd (the pods' network namespaces are in containerd's
//     state directory), the
//     kubelet's device plugin directory /var/lib/kubelet/device-plugins
//     and container log links in /var/log/containers (places the
//     components use whatever they are told);
//   - processes: the components, containerd's shims and the pods.
//
// Before it changes anything, a node records in
// /var/lib/varnishgw-testnode/state.json the sysctls' values and which of
// those shared directories exist and what they hold. Then it starts a
// janitor: the test binary again (see the init function), which holds the
// node lock too and waits for the node's owner to stop the node or to end in
// any way (a normal end, a panic, SIGINT, SIGKILL). The janitor then kills
// the node's processes and pods (found by an environment mark, by command
// line and by cgroup), unmounts everything under the node's directory (the
// pods' network namespaces and volumes, containers' root file systems, the
// kubelet's root), runs `kube-proxy --cleanup`, removes every KUBE- and CNI-
// chain and the nf_tables tables made meanwhile that are left empty,
// deletes the bridge and the cgroups, restores
// the sysctls and shared directories, removes the node's directory, and
// only then lets the lock go. When the janitor itself was killed, the next
// node start (or [SweepNode]) finds the state file and does the same. A node
// refuses to start on a machine with another Kubernetes node's iptables
// chains, which this cleanup would remove. The lock file stays.
//
// The package nodetest proves it: it compares a snapshot of the machine
// (sysctls, iptables-save of both families, the nf_tables ruleset, mounts,
// links, addresses, routes, cgroups, the shared directories, the node's and
// pods' processes)
// before a node and after it stopped normally, by SIGINT, by a panic, by
// SIGKILL, and by SIGKILL of the test binary and its janitor followed by a
// sweep.
//
// # Binaries
//
// The binaries come from the environment that scripts/setup.sh writes to
// bin/tools.env and the GNUmakefile exports: VARNISHGW_ETCD,
// VARNISHGW_KUBE_APISERVER and VARNISHGW_GATEWAY_API_CRDS, and for a node
// VARNISHGW_KUBE_BIN_DIR and VARNISHGW_PAUSE_IMAGE (the pause image, built
// from the Kubernetes release's pause.c).
//
// Child processes die with the test binary: they run in their own process
// group with a parent-death signal, and Main stops them on SIGINT and SIGTERM,
// so a failing, panicking or interrupted test leaves no etcd or kube-apiserver
// behind.
package testenv
