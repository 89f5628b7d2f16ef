package testenv

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/toolsenv"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/remotecommand"
)

// Addresses and names of the node. Pods and Services get addresses in the
// benchmarking block 198.18.0.0/15 (RFC 2544), which is not routed
// anywhere: the traffic plainly stays on this machine.
const (
	// NodeName is the node's name.
	NodeName = "varnishgw-node"
	// NodeIP is the node's InternalIP, on the CNI bridge: the kubelet and,
	// with a node, the API server listen on it, and pods reach it.
	NodeIP = "198.18.0.1"
	// PodCIDR is the pods' address range.
	PodCIDR = "198.18.0.0/24"
	// ServiceCIDR is the Services' address range (also without a node):
	// room for the thousands of Services of the benchmarks.
	ServiceCIDR = "198.19.0.0/16"
	// KubernetesServiceIP is the ClusterIP of the default/kubernetes
	// Service, which kube-proxy forwards to the API server.
	KubernetesServiceIP = "198.19.0.1"
)

// Environment variables that name what a node needs besides the control
// plane. scripts/setup.sh writes them to bin/tools.env.
const (
	// EnvKubeBinDir is a directory with kube-controller-manager,
	// kube-scheduler, kubelet and kube-proxy of the API server's version.
	EnvKubeBinDir = "VARNISHGW_KUBE_BIN_DIR"
	// EnvPauseImage is the pause image's OCI archive.
	EnvPauseImage = "VARNISHGW_PAUSE_IMAGE"
	// EnvSkipNode=1 makes GetNode skip, instead of fail, a test on a machine
	// that cannot run a node.
	EnvSkipNode = "VARNISHGW_SKIP_NODE"
)

// Where containerd, runc and the CNI plugins are: Debian's packages.
const (
	cniBinDir = "/usr/lib/cni"
	runcPath  = "/usr/sbin/runc"
)

// NodeOptions configure a node. The zero value reads everything from the
// environment.
type NodeOptions struct {
	// KubeBinDir and PauseImage default to EnvKubeBinDir and EnvPauseImage.
	KubeBinDir string
	PauseImage string
	// LockTimeout bounds the wait for another node on this machine to end
	// (default 20 minutes).
	LockTimeout time.Duration
}

func (o NodeOptions) withDefaults() (NodeOptions, error) {
	if _, err := toolsenv.Load(); err != nil {
		return o, err
	}
	if o.KubeBinDir == "" {
		o.KubeBinDir = os.Getenv(EnvKubeBinDir)
	}
	if o.PauseImage == "" {
		o.PauseImage = os.Getenv(EnvPauseImage)
	}
	if err := checkNodeTools(o.KubeBinDir, o.PauseImage); err != nil {
		return o, err
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = 20 * time.Minute
	}
	return o, nil
}

var nodeBinaries = []string{"kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"}

func checkNodeTools(binDir, pause string) error {
	var errs []error
	if binDir == "" {
		errs = append(errs, fmt.Errorf("%s is not set: %s", EnvKubeBinDir, toolsenv.Fix))
	} else {
		for _, b := range nodeBinaries {
			if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
				errs = append(errs, fmt.Errorf("%s=%s: %w; run `make setup`", EnvKubeBinDir, binDir, err))
			}
		}
	}
	if pause == "" {
		errs = append(errs, fmt.Errorf("%s is not set: %s", EnvPauseImage, toolsenv.Fix))
	} else if _, err := os.Stat(pause); err != nil {
		errs = append(errs, fmt.Errorf("%s=%s: %w; run `make setup`", EnvPauseImage, pause, err))
	}
	return errors.Join(errs...)
}

// NodeSupported reports whether this machine can run a test node, and if
// not, why: it needs root, cgroups with the cpu, memory and pids
// controllers, the overlay file system, containerd, runc, the CNI plugins,
// iproute2, iptables and nftables (internal/testing/testenv/debian-packages.txt), the
// Kubernetes binaries and pause image that `make setup` builds (from the
// environment, see EnvKubeBinDir), and no other network on 198.18.0.0/15.
func NodeSupported() error {
	// Every reason at once: a tools file this user cannot read (a
	// checkout in a private directory, say) does not hide "not root".
	_, loadErr := toolsenv.Load()
	err := errors.Join(loadErr, machineSupportsNode(), checkNodeTools(os.Getenv(EnvKubeBinDir), os.Getenv(EnvPauseImage)))
	if err != nil {
		return fmt.Errorf("this machine cannot run a test node: %w", err)
	}
	return nil
}

// machineSupportsNode is NodeSupported without the tools from the
// environment.
func machineSupportsNode() error {
	var errs []error
	if os.Geteuid() != 0 {
		errs = append(errs, errors.New("not root: the kubelet and containerd mount file systems and create cgroups and network namespaces, and kube-proxy writes iptables rules"))
	}
	errs = append(errs, checkCgroups())
	if fs, err := os.ReadFile("/proc/filesystems"); err != nil || !bytes.Contains(fs, []byte("\toverlay\n")) {
		errs = append(errs, errors.New("the kernel has no overlay file system (containerd's snapshotter needs it)"))
	}
	var missing []string
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "ip", "iptables", "ip6tables", "iptables-save", "iptables-restore", "ip6tables-save", "ip6tables-restore", "nft"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			missing = append(missing, filepath.Join(cniBinDir, p))
		}
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("missing %s: install the Debian packages of internal/testing/testenv/debian-packages.txt (`make setup` does)", strings.Join(missing, ", ")))
	}
	_, block, _ := net.ParseCIDR("198.18.0.0/15")
	if ifaces, err := net.Interfaces(); err == nil {
		for _, i := range ifaces {
			addrs, _ := i.Addrs()
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok && block.Contains(ipn.IP) && i.Name != nodeBridge {
					errs = append(errs, fmt.Errorf("interface %s has address %s in 198.18.0.0/15, which the test node's pods and Services use", i.Name, a))
				}
			}
		}
	}
	return errors.Join(errs...)
}

func checkCgroups() error {
	data, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		return fmt.Errorf("no cgroups: %w", err)
	}
	enabled := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[3] == "1" {
			enabled[f[0]] = true
		}
	}
	v1, v2, err := cgroupMounts()
	if err != nil || (len(v1) == 0 && v2 == "") {
		return fmt.Errorf("no cgroup file system is mounted (%v)", err)
	}
	var missing []string
	for _, c := range []string{"cpu", "memory", "pids"} {
		if !enabled[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the cgroup controllers %s are not enabled", strings.Join(missing, ", "))
	}
	return nil
}

// Node is a single-node cluster on this machine, registered with the
// control plane: kube-controller-manager, kube-scheduler, containerd (with
// runc and a CNI bridge), kubelet and kube-proxy. Pods run for real; their
// IPs and Services' ClusterIPs are reachable from this machine. There is no
// cluster DNS: pods use this machine's /etc/resolv.conf.
type Node struct {
	// Name is the Node object's name (NodeName).
	Name string
	// IP is the node's InternalIP (NodeIP).
	IP string
	// Dir holds the node's data, configuration and the components' logs
	// (Dir/logs/NAME.log); it is removed when the node stops.
	Dir string
	// PauseImage is the name of the pause image (the pods' sandbox image),
	// which is in the node's containerd: a small image that runs and does
	// nothing, for tests that need any pod.
	PauseImage string
	// StartTime is how long the node took to start, after the API server
	// was ready.
	StartTime time.Duration

	cp         *ControlPlane
	opts       NodeOptions
	containerd string // its socket
	procs      []*process
}

func nodePath(parts ...string) string { return filepath.Join(append([]string{nodeBase}, parts...)...) }

// nodeAPIServerArgs are the API server's flags with a node, and writes the
// client certificate it uses with kubelets.
func (cp *ControlPlane) nodeAPIServerArgs() ([]string, error) {
	certPEM, keyPEM, err := cp.ca.issue(certSpec{commonName: "kube-apiserver-kubelet-client"})
	if err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{"kubelet-client.crt": certPEM, "kubelet-client.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(cp.pki, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
	}
	return []string{
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--kubelet-client-certificate=" + filepath.Join(cp.pki, "kubelet-client.crt"),
		"--kubelet-client-key=" + filepath.Join(cp.pki, "kubelet-client.key"),
		"--kubelet-certificate-authority=" + filepath.Join(cp.pki, "ca.crt"),
		"--kubelet-preferred-address-types=InternalIP",
		// The default reconciler publishes NodeIP in default/kubernetes.
		"--endpoint-reconciler-type=lease",
	}, nil
}

// startNode starts the node's components against the running control
// plane and waits until the node is Ready, the controllers have set up the
// default namespace and kube-proxy forwards the kubernetes Service.
func startNode(ctx context.Context, cp *ControlPlane, host *nodeHost, opts NodeOptions) (_ *Node, err error) {
	start := time.Now()
	n := &Node{Name: NodeName, IP: NodeIP, Dir: nodeBase, cp: cp, opts: opts, containerd: nodePath("containerd", "containerd.sock")}
	defer func() {
		if err != nil {
			n.stopDaemons()
		}
	}()
	for _, d := range []string{"pki", "config", "logs", "containerd/root", "containerd/state", "containerd/certs.d", "runc", "cni/net.d", "cni/ipam", "kubelet", "pod-logs", "volume-plugins"} {
		if err := os.MkdirAll(nodePath(d), 0o750); err != nil {
			return nil, fmt.Errorf("create node dir: %w", err)
		}
	}
	if err := n.writeIdentities(); err != nil {
		return nil, err
	}
	// The API server's kubelet client may use the kubelet API (logs, exec).
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "varnishgw-testenv:kube-apiserver-kubelet-client"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "kube-apiserver-kubelet-client"}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("bind the API server's kubelet client: %w", err)
	}
	if err := n.startControllers(); err != nil {
		return nil, err
	}
	if err := n.startContainerd(ctx); err != nil {
		return nil, err
	}
	if err := n.startKubelet(); err != nil {
		return nil, err
	}
	if err := n.startKubeProxy(); err != nil {
		return nil, err
	}
	if err := n.waitReady(ctx); err != nil {
		return nil, err
	}
	n.StartTime = time.Since(start)
	return n, nil
}

// writeIdentities writes the components' certificates and kubeconfigs.
func (n *Node) writeIdentities() error {
	ca := n.cp.ca
	write := func(name string, data []byte) error {
		if err := os.WriteFile(nodePath("pki", name), data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		return nil
	}
	if err := write("ca.crt", ca.certPEM); err != nil {
		return err
	}
	if err := write("sa.key", mustRead(filepath.Join(n.cp.pki, "sa.key"))); err != nil {
		return err
	}
	for _, id := range []struct {
		file string
		spec certSpec
	}{
		{"kubelet", certSpec{commonName: "system:node:" + NodeName, organizations: []string{"system:nodes"}}},
		{"kubelet-serving", certSpec{commonName: NodeName, server: true, ips: []net.IP{net.ParseIP(NodeIP)}, dnsNames: []string{NodeName}}},
		{"kube-controller-manager", certSpec{commonName: "system:kube-controller-manager"}},
		{"kube-scheduler", certSpec{commonName: "system:kube-scheduler"}},
		{"kube-proxy", certSpec{commonName: "system:kube-proxy"}},
	} {
		certPEM, keyPEM, err := ca.issue(id.spec)
		if err != nil {
			return err
		}
		if err := errors.Join(write(id.file+".crt", certPEM), write(id.file+".key", keyPEM)); err != nil {
			return err
		}
		if id.spec.server {
			continue
		}
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["testenv"] = &clientcmdapi.Cluster{Server: n.cp.Config.Host, CertificateAuthorityData: ca.certPEM}
		cfg.AuthInfos[id.file] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
		cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: id.file}
		cfg.CurrentContext = "testenv"
		if err := clientcmd.WriteToFile(*cfg, nodePath("config", id.file+".kubeconfig")); err != nil {
			return fmt.Errorf("write kubeconfig of %s: %w", id.file, err)
		}
	}
	return nil
}

func mustRead(path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return data
}

// start starts a component of the node, marked as the node's, its output
// in Dir/logs/NAME.log.
func (n *Node) start(name string, args ...string) (*process, error) {
	p, err := startProcess(nodePath("logs"), name, n.bin(name), []string{envMarker + "=" + nodeBase}, args...)
	if err != nil {
		return nil, err
	}
	n.procs = append(n.procs, p)
	return p, nil
}

func (n *Node) bin(name string) string {
	if slices.Contains(nodeBinaries, name) {
		return filepath.Join(n.opts.KubeBinDir, name)
	}
	return name
}

func (n *Node) startControllers() error {
	if _, err := n.start("kube-controller-manager",
		"--kubeconfig="+nodePath("config", "kube-controller-manager.kubeconfig"),
		// Each controller acts as its own ServiceAccount, as in kubeadm
		// clusters, so RBAC applies to them as usual.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+nodePath("pki", "sa.key"),
		"--root-ca-file="+nodePath("pki", "ca.crt"),
		"--service-cluster-ip-range="+ServiceCIDR,
		"--cluster-cidr="+PodCIDR,
		"--flex-volume-plugin-dir="+nodePath("volume-plugins"),
		"--leader-elect=false",
		"--secure-port=0",
		"--profiling=false",
		"--v=1",
	); err != nil {
		return err
	}
	_, err := n.start("kube-scheduler",
		"--kubeconfig="+nodePath("config", "kube-scheduler.kubeconfig"),
		"--leader-elect=false",
		"--secure-port=0",
		"--profiling=false",
		"--v=1",
	)
	return err
}

// containerdConfig is containerd's configuration: its own root, state,
// socket and runc root; the CRI plugin with the pause image as sandbox
// image, the cgroupfs driver and the CNI bridge; registries configured per
// host in containerd/certs.d (see AllowInsecureRegistry).
func (n *Node) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
# The options plugin would create /opt/containerd; the snapshotters other
# than overlayfs are not used.
disabled_plugins = [
  "io.containerd.internal.v1.opt",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
]

[grpc]
  address = %q

# Unused (pods run with runtime v2), but the task service needs it.
[plugins."io.containerd.runtime.v1.linux"]
  runtime_root = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # This machine's capability bounding set lacks CAP_SYS_RESOURCE: without
  # this, runc fails to set a negative oom_score_adj and every pod sandbox
  # fails to start.
  restrict_oom_score_adj = true
  # The pods' network namespaces in the state directory, not /run/netns.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = %q
        Root = %q
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
`, nodePath("containerd", "root"), nodePath("containerd", "state"), n.containerd, nodePath("runc-v1"), n.PauseImage,
		runcPath, nodePath("runc"), cniBinDir, nodePath("cni", "net.d"), nodePath("containerd", "certs.d"))
}

// cniConfig is the one network: a bridge with host-local addresses from
// PodCIDR (the bridge and its address exist already, see setupBridge).
func cniConfig() string {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "varnishgw",
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      nodeBridge,
			"isGateway":   true,
			"ipMasq":      false, // nothing to reach beyond this machine
			"hairpinMode": true,  // a pod reaches itself through its Service
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": PodCIDR, "gateway": NodeIP}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				"dataDir": nodePath("cni", "ipam"),
			},
		}},
	}
	data, _ := json.MarshalIndent(conf, "", "  ")
	return string(data)
}

func (n *Node) startContainerd(ctx context.Context) error {
	name, err := archiveImageName(n.opts.PauseImage)
	if err != nil {
		return fmt.Errorf("pause image: %w", err)
	}
	n.PauseImage = name
	if err := os.WriteFile(nodePath("config", "containerd.toml"), []byte(n.containerdConfig()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(nodePath("cni", "net.d", "10-varnishgw.conflist"), []byte(cniConfig()), 0o644); err != nil {
		return err
	}
	p, err := n.start("containerd", "--config="+nodePath("config", "containerd.toml"), "--log-level=info")
	if err != nil {
		return err
	}
	if err := p.wait(ctx, func(ctx context.Context) error {
		_, err := n.ctr(ctx, "version")
		return err
	}); err != nil {
		return err
	}
	if _, err := n.ImportImage(ctx, n.opts.PauseImage); err != nil {
		return err
	}
	return nil
}

// ctr runs containerd's ctr against the node's containerd, in the
// namespace of Kubernetes' images and containers.
func (n *Node) ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.containerd, "--namespace", "k8s.io"}, args...)...)
	cmd.Env = append(os.Environ(), envMarker+"="+nodeBase)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

func (n *Node) startKubelet() error {
	port := freePort(NodeIP)
	healthz := freePort("127.0.0.1")
	conf := map[string]any{
		"apiVersion":         "kubelet.config.k8s.io/v1beta1",
		"kind":               "KubeletConfiguration",
		"address":            NodeIP,
		"port":               port,
		"readOnlyPort":       0,
		"healthzBindAddress": "127.0.0.1",
		"healthzPort":        healthz,
		"tlsCertFile":        nodePath("pki", "kubelet-serving.crt"),
		"tlsPrivateKeyFile":  nodePath("pki", "kubelet-serving.key"),
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": nodePath("pki", "ca.crt")},
		},
		"authorization": map[string]any{"mode": "Webhook"},
		// This machine has cgroup v1, which kubelet 1.35 refuses unless
		// told otherwise; containerd uses cgroupfs too.
		"failCgroupV1":             false,
		"cgroupDriver":             "cgroupfs",
		"cgroupRoot":               "/" + nodeCgroup,
		"failSwapOn":               false,
		"containerRuntimeEndpoint": "unix://" + n.containerd,
		"podLogsDir":               nodePath("pod-logs"),
		"volumePluginDir":          nodePath("volume-plugins"),
		"resolvConf":               "/etc/resolv.conf",
		"clusterDomain":            "cluster.local",
		// Images imported into the node cannot be pulled again: never
		// collect them, and evict pods only when the machine is nearly
		// out of room.
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		// Kubernetes 1.35 verifies pull credentials for images the kubelet
		// pulled (KubeletEnsureSecretPulledImages, beta): once it has pulled
		// an image's digest from a registry under one name, an imported
		// image of the same digest under another name no longer counts as
		// preloaded and is pulled again, which an import cannot be. Tests
		// import images and pull the same ones from a registry, so the
		// node never re-verifies.
		"imagePullCredentialsVerificationPolicy": "NeverVerify",
		"evictionHard": map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
			"nodefs.inodesFree": "1%",
		},
		// Gateways with HTTPS listeners may set net.ipv4.tcp_migrate_req in
		// their pods (the gateway's sysctls): a hitch reload then moves the
		// connections queued on a closing listen socket instead of
		// resetting them. It is namespaced but not on the kubelet's safe
		// list.
		"allowedUnsafeSysctls": []string{"net.ipv4.tcp_migrate_req"},
		"serializeImagePulls":  false,
		"registerNode":         true,
	}
	data, _ := json.MarshalIndent(conf, "", "  ")
	if err := os.WriteFile(nodePath("config", "kubelet.json"), data, 0o644); err != nil {
		return err
	}
	_, err := n.start("kubelet",
		"--config="+nodePath("config", "kubelet.json"),
		"--kubeconfig="+nodePath("config", "kubelet.kubeconfig"),
		"--root-dir="+nodePath("kubelet"),
		"--hostname-override="+NodeName,
		"--node-ip="+NodeIP,
		"--v=1",
	)
	return err
}

func (n *Node) startKubeProxy() error {
	conf := map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"clientConnection":   map[string]any{"kubeconfig": nodePath("config", "kube-proxy.kubeconfig")},
		"mode":               "iptables",
		"clusterCIDR":        PodCIDR,
		"hostnameOverride":   NodeName,
		"healthzBindAddress": "127.0.0.1:" + strconv.Itoa(freePort("127.0.0.1")),
		"metricsBindAddress": "127.0.0.1:" + strconv.Itoa(freePort("127.0.0.1")),
		// NodePorts only on the node's own address, none on localhost (which
		// would set route_localnet), and the machine's conntrack settings
		// left as they are (zero means leave).
		"nodePortAddresses": []string{NodeIP + "/32"},
		"iptables":          map[string]any{"localhostNodePorts": false},
		"conntrack": map[string]any{
			"maxPerCore":            0,
			"min":                   0,
			"tcpEstablishedTimeout": "0s",
			"tcpCloseWaitTimeout":   "0s",
		},
	}
	data, _ := json.MarshalIndent(conf, "", "  ")
	if err := os.WriteFile(nodePath("config", "kube-proxy.json"), data, 0o644); err != nil {
		return err
	}
	_, err := n.start("kube-proxy", "--config="+nodePath("config", "kube-proxy.json"), "--v=1")
	return err
}

// waitReady waits until the Node is Ready, the controllers have published
// kube-root-ca.crt and the default ServiceAccount in the default
// namespace, and kube-proxy forwards the kubernetes Service to the API
// server.
func (n *Node) waitReady(ctx context.Context) error {
	c := n.cp.Client
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(n.cp.caPEM)
	viaService := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	checks := []struct {
		what  string
		ready func(ctx context.Context) error
	}{
		{"Node " + NodeName + " Ready", func(ctx context.Context) error {
			node, err := c.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					if cond.Status == corev1.ConditionTrue {
						return nil
					}
					return fmt.Errorf("condition Ready=%s: %s", cond.Status, cond.Message)
				}
			}
			return errors.New("no Ready condition yet")
		}},
		{"ConfigMap default/kube-root-ca.crt (kube-controller-manager)", func(ctx context.Context) error {
			_, err := c.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			return err
		}},
		{"ServiceAccount default/default (kube-controller-manager)", func(ctx context.Context) error {
			_, err := c.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
			return err
		}},
		{"the API server through the kubernetes Service (kube-proxy)", func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+KubernetesServiceIP+"/livez", nil)
			resp, err := viaService.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			// Anonymous requests may be refused; any answer comes from
			// the API server.
			return nil
		}},
	}
	for _, check := range checks {
		var last error
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			for _, p := range n.procs {
				select {
				case <-p.done:
					return false, fmt.Errorf("%s exited (%v); last log lines:\n%s", p.name, p.exitErr, p.tail(30))
				default:
				}
			}
			attempt, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			last = check.ready(attempt)
			return last == nil, nil
		})
		if err != nil {
			return fmt.Errorf("start node: wait for %s: %w (last: %v)\n%s", check.what, err, last, n.logTails(15))
		}
	}
	return nil
}

// logTails returns the last lines of every component's log.
func (n *Node) logTails(lines int) string {
	var b strings.Builder
	for _, p := range n.procs {
		fmt.Fprintf(&b, "--- %s (%s):\n%s\n", p.name, p.logPath, p.tail(lines))
	}
	return b.String()
}

// LogPath is the log file of a component: kube-controller-manager,
// kube-scheduler, containerd, kubelet or kube-proxy.
func (n *Node) LogPath(component string) string { return nodePath("logs", component+".log") }

// stopDaemons stops the node's components, newest first. The pods keep
// running until the janitor kills them.
func (n *Node) stopDaemons() {
	if n == nil {
		return
	}
	for i := len(n.procs) - 1; i >= 0; i-- {
		n.procs[i].stop()
	}
	n.procs = nil
}

// ImportImage imports the images of an OCI or Docker archive (such as
// `make image` writes to bin/images/) into the node's containerd, where
// pods find them: use a tag other than latest, or imagePullPolicy
// IfNotPresent or Never. It returns the names of the imported images.
func (n *Node) ImportImage(ctx context.Context, archive string) ([]string, error) {
	if _, err := os.Stat(archive); err != nil {
		return nil, fmt.Errorf("import image: %w", err)
	}
	out, err := n.ctr(ctx, "images", "import", "--no-unpack=false", archive)
	if err != nil {
		return nil, fmt.Errorf("import image %s: %w", archive, err)
	}
	// "unpacking NAME (sha256:...)...done"
	var names []string
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "unpacking "); ok {
			names = append(names, strings.Fields(rest)[0])
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("import image %s: no image in the archive (ctr said: %s)", archive, strings.TrimSpace(out))
	}
	return names, nil
}

// Images lists the images in the node's containerd.
func (n *Node) Images(ctx context.Context) ([]string, error) {
	out, err := n.ctr(ctx, "images", "list", "--quiet")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// AllowInsecureRegistry lets the node pull over plain HTTP from the
// registry at host ("198.18.0.1:5000"): it writes containerd's hosts.toml
// for it, which containerd reads on each pull. A registry on this
// machine's loopback (localhost or 127.0.0.1) needs none: containerd speaks
// plain HTTP to it already.
func (n *Node) AllowInsecureRegistry(host string) error {
	if _, _, err := net.SplitHostPort(host); err != nil {
		return fmt.Errorf("allow insecure registry %q: want host:port, like 127.0.0.1:5000: %w", host, err)
	}
	dir := nodePath("containerd", "certs.d", host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("allow insecure registry %s: %w", host, err)
	}
	conf := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+host, "http://"+host)
	if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(conf), 0o644); err != nil {
		return fmt.Errorf("allow insecure registry %s: %w", host, err)
	}
	return nil
}

// podFailureReasons are container states that do not end by waiting.
var podFailureReasons = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError", "CrashLoopBackOff", "RunContainerError"}

// WaitPodsReady waits until exactly count pods of namespace that match the
// label selector are Ready (none terminating) and returns them. It fails at
// once, naming the pod, container, image and reason, when a container
// cannot be pulled or started or keeps crashing.
func (n *Node) WaitPodsReady(ctx context.Context, namespace, selector string, count int) ([]corev1.Pod, error) {
	var ready []corev1.Pod
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := n.cp.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		ready = ready[:0]
		var notReady []string
		for _, p := range list.Items {
			for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
				if w := cs.State.Waiting; w != nil && slices.Contains(podFailureReasons, w.Reason) {
					return false, fmt.Errorf("pod %s/%s: container %s (image %s): %s: %s", namespace, p.Name, cs.Name, cs.Image, w.Reason, w.Message)
				}
			}
			if p.DeletionTimestamp == nil && podReady(&p) {
				ready = append(ready, p)
			} else {
				notReady = append(notReady, fmt.Sprintf("%s (%s)", p.Name, p.Status.Phase))
			}
		}
		last = fmt.Sprintf("%d Ready, not ready: %v", len(ready), notReady)
		return len(ready) == count && len(notReady) == 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("wait for %d Ready pods in %s matching %q: %w (last: %s)", count, namespace, selector, err, last)
	}
	return ready, nil
}

// archiveImageName returns the name an OCI archive's image is imported
// under (its io.containerd.image.name annotation, which package ociimage
// writes).
func archiveImageName(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return "", fmt.Errorf("%s: no index.json (%v)", path, err)
		}
		if h.Name != "index.json" {
			continue
		}
		var index struct {
			Manifests []struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.NewDecoder(tr).Decode(&index); err != nil {
			return "", fmt.Errorf("%s: index.json: %w", path, err)
		}
		for _, m := range index.Manifests {
			if name := m.Annotations["io.containerd.image.name"]; name != "" {
				return name, nil
			}
		}
		return "", fmt.Errorf("%s: no image with an io.containerd.image.name annotation", path)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodLogs returns a container's log, read through the API server from the
// kubelet (as `kubectl logs` does).
func (n *Node) PodLogs(ctx context.Context, namespace, pod, container string) (string, error) {
	data, err := n.cp.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of %s/%s container %s: %w", namespace, pod, container, err)
	}
	return string(data), nil
}

// Exec runs a command in a container through the API server and the
// kubelet (as `kubectl exec` does) and returns its output.
func (n *Node) Exec(ctx context.Context, namespace, pod, container string, command ...string) (stdout, stderr string, err error) {
	req := n.cp.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewWebSocketExecutor(n.cp.Config, http.MethodGet, req.URL().String())
	if err != nil {
		return "", "", fmt.Errorf("exec in %s/%s: %w", namespace, pod, err)
	}
	var out, errOut bytes.Buffer
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	if err != nil {
		err = fmt.Errorf("exec %v in %s/%s container %s: %w (stderr: %s)", command, namespace, pod, container, err, errOut.String())
	}
	return out.String(), errOut.String(), err
}
