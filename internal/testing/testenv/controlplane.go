package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/toolsenv"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/keyutil"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// Environment variables that name the binaries and files the control plane
// needs. scripts/setup.sh writes them to bin/tools.env.
const (
	EnvEtcd          = "VARNISHGW_ETCD"
	EnvKubeAPIServer = "VARNISHGW_KUBE_APISERVER"
	EnvGatewayCRDs   = "VARNISHGW_GATEWAY_API_CRDS"
)

// dirPrefix names the temporary directories of control planes; the process
// id follows it so that a later run can remove the leftovers of a dead one.
const dirPrefix = "varnishgw-testenv-"

// Options configure a control plane. The zero value reads everything from the
// environment.
type Options struct {
	// EtcdPath, KubeAPIServerPath and CRDDir default to the environment
	// variables EnvEtcd, EnvKubeAPIServer and EnvGatewayCRDs.
	EtcdPath          string
	KubeAPIServerPath string
	CRDDir            string
	// ExperimentalChannel installs the Gateway API experimental channel's
	// CRDs (the "experimental" directory beside the standard one that
	// EnvGatewayCRDs names) instead of the standard channel's. Fields that
	// exist only in the experimental channel (an HTTPRoute rule's retry
	// and sessionPersistence) are pruned by a standard channel API server.
	ExperimentalChannel bool
	// StartTimeout bounds the whole start, CRDs included (default 2
	// minutes, 5 with a node, not counting the wait for the node lock).
	StartTimeout time.Duration
	// Node, when set, starts a single-node cluster with the control plane:
	// kube-controller-manager, kube-scheduler, containerd, kubelet and
	// kube-proxy (see Node). The API server then serves on NodeIP, which
	// pods reach, instead of 127.0.0.1.
	Node *NodeOptions
}

// ControlPlane is a running etcd and kube-apiserver.
type ControlPlane struct {
	// Dir holds the data, certificates, logs and kubeconfig files.
	Dir string
	// Kubeconfig is the path of a kubeconfig for the admin identity
	// (group system:masters).
	Kubeconfig string
	// Config is the admin identity's client configuration.
	Config *rest.Config
	// Client and Gateway are admin clients for core and Gateway API objects.
	Client  kubernetes.Interface
	Gateway gatewayclient.Interface

	// Node is the single-node cluster when Options.Node asked for one,
	// else nil.
	Node *Node

	etcd, apiserver *process
	apiserverBin    string
	apiserverArgs   []string
	apiserverStarts int
	etcdURL         string
	caPEM           []byte
	ca              *authority
	pki             string
	apiPort         int
	host            *nodeHost // the node's hold on this machine, when there is a node
}

// Start starts etcd and kube-apiserver in a new temporary directory, installs
// the Gateway API CRDs and waits until they are served, then starts the node
// when Options.Node asks for one. Call Stop when done.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, err
	}
	var host *nodeHost
	if opts.Node != nil {
		// The wait for the machine's node lock is not part of the start
		// time: it has its own limit.
		if host, err = acquireNodeHost(ctx, *opts.Node); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				err = errors.Join(err, host.release())
			}
		}()
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	removeStaleDirs()
	dir, err := os.MkdirTemp("", dirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("create control plane dir: %w", err)
	}
	cp := &ControlPlane{Dir: dir, host: host}
	defer func() {
		if err != nil {
			cp.host = nil // released above
			err = errors.Join(err, cp.Stop())
		}
	}()
	if cp.ca, err = newAuthority(); err != nil {
		return nil, err
	}
	if err := cp.startEtcd(ctx, opts.EtcdPath); err != nil {
		return nil, err
	}
	if err := cp.startAPIServer(ctx, opts.KubeAPIServerPath); err != nil {
		return nil, err
	}
	if err := installCRDs(ctx, apiextensionsclient.NewForConfigOrDie(cp.Config), cp.Client, opts.CRDDir); err != nil {
		return nil, err
	}
	if host != nil {
		if cp.Node, err = startNode(ctx, cp, host, *opts.Node); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

func (o Options) withDefaults() (Options, error) {
	if _, err := toolsenv.Load(); err != nil {
		return o, fmt.Errorf("start control plane: %w", err)
	}
	fromEnv := func(field *string, env string) error {
		if *field == "" {
			*field = os.Getenv(env)
		}
		if *field == "" {
			if err := toolsenv.Missing(env); err != nil {
				return fmt.Errorf("start control plane: %w", err)
			}
		}
		if _, err := os.Stat(*field); err != nil {
			return fmt.Errorf("start control plane: %s=%s: %w; run `make setup`", env, *field, err)
		}
		return nil
	}
	if err := errors.Join(
		fromEnv(&o.EtcdPath, EnvEtcd),
		fromEnv(&o.KubeAPIServerPath, EnvKubeAPIServer),
		fromEnv(&o.CRDDir, EnvGatewayCRDs),
	); err != nil {
		return o, err
	}
	if o.ExperimentalChannel {
		dir := filepath.Join(filepath.Dir(o.CRDDir), "experimental")
		if _, err := os.Stat(dir); err != nil {
			return o, fmt.Errorf("start control plane: the experimental channel's CRDs beside %s: %w; run `make setup`", o.CRDDir, err)
		}
		o.CRDDir = dir
	}
	if o.Node != nil {
		node, err := o.Node.withDefaults()
		if err != nil {
			return o, err
		}
		o.Node = &node
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 2 * time.Minute
		if o.Node != nil {
			o.StartTimeout = 5 * time.Minute
		}
	}
	return o, nil
}

func (cp *ControlPlane) startEtcd(ctx context.Context, bin string) error {
	clientURL := "http://127.0.0.1:" + strconv.Itoa(freePort("127.0.0.1"))
	peerURL := "http://127.0.0.1:" + strconv.Itoa(freePort("127.0.0.1"))
	cp.etcdURL = clientURL
	var err error
	cp.etcd, err = startProcess(cp.Dir, "etcd", bin, nil,
		"--name=testenv",
		"--data-dir="+filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=testenv="+peerURL,
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	return cp.etcd.waitHTTP(ctx, &http.Client{Timeout: time.Second}, clientURL+"/health")
}

func (cp *ControlPlane) startAPIServer(ctx context.Context, bin string) error {
	cp.pki = filepath.Join(cp.Dir, "pki")
	if err := os.MkdirAll(cp.pki, 0o700); err != nil {
		return fmt.Errorf("create pki dir: %w", err)
	}
	bind := "127.0.0.1"
	serving := certSpec{commonName: "kube-apiserver", server: true, ips: []net.IP{net.ParseIP("127.0.0.1")}, dnsNames: []string{"localhost"}}
	if cp.host != nil {
		// Pods reach the API server on the node's address, directly or
		// through the kubernetes Service.
		bind = NodeIP
		serving.ips = append(serving.ips, net.ParseIP(NodeIP), net.ParseIP(KubernetesServiceIP))
		serving.dnsNames = append(serving.dnsNames, "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
	}
	certPEM, keyPEM, err := cp.ca.issue(serving)
	if err != nil {
		return fmt.Errorf("generate serving certificate: %w", err)
	}
	saKey, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		return fmt.Errorf("generate service account key: %w", err)
	}
	token := randomToken()
	files := map[string][]byte{
		"ca.crt":      cp.ca.certPEM,
		"serving.crt": certPEM,
		"serving.key": keyPEM,
		"sa.key":      saKey,
		"tokens.csv":  []byte(token + ",admin,admin,system:masters\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(cp.pki, name), data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}

	cp.apiPort = freePort(bind)
	host := "https://" + net.JoinHostPort(bind, strconv.Itoa(cp.apiPort))
	args := []string{
		"--etcd-servers=" + cp.etcdURL,
		"--etcd-prefix=/registry",
		"--bind-address=" + bind,
		"--advertise-address=" + bind,
		"--secure-port=" + strconv.Itoa(cp.apiPort),
		"--tls-cert-file=" + filepath.Join(cp.pki, "serving.crt"),
		"--tls-private-key-file=" + filepath.Join(cp.pki, "serving.key"),
		"--client-ca-file=" + filepath.Join(cp.pki, "ca.crt"),
		"--cert-dir=" + cp.pki,
		"--token-auth-file=" + filepath.Join(cp.pki, "tokens.csv"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(cp.pki, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(cp.pki, "sa.key"),
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--v=0",
	}
	if cp.host == nil {
		args = append(args,
			"--authorization-mode=RBAC",
			// The endpoint reconciler refuses a loopback address.
			"--endpoint-reconciler-type=none",
		)
	} else {
		nodeArgs, err := cp.nodeAPIServerArgs()
		if err != nil {
			return err
		}
		args = append(args, nodeArgs...)
	}
	audit, err := auditArgs(cp.Dir)
	if err != nil {
		return err
	}
	args = append(args, audit...)
	cp.apiserverBin, cp.apiserverArgs = bin, args
	cp.apiserverStarts = 1
	cp.apiserver, err = startProcess(cp.Dir, "kube-apiserver", bin, nil, args...)
	if err != nil {
		return err
	}

	cp.caPEM = cp.ca.certPEM
	cp.Config = &rest.Config{
		Host:            host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.caPEM},
		QPS:             200,
		Burst:           400,
	}
	cp.Kubeconfig = filepath.Join(cp.Dir, "admin.kubeconfig")
	if err := writeKubeconfig(cp.Kubeconfig, host, cp.caPEM, "admin", token); err != nil {
		return err
	}
	if cp.Client, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	if cp.Gateway, err = gatewayclient.NewForConfig(cp.Config); err != nil {
		return fmt.Errorf("admin gateway client: %w", err)
	}
	return cp.waitAPIServer(ctx)
}

// waitAPIServer waits until kube-apiserver answers /readyz.
func (cp *ControlPlane) waitAPIServer(ctx context.Context) error {
	return cp.apiserver.wait(ctx, func(ctx context.Context) error {
		body, err := cp.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%w: %s", err, body)
		}
		return nil
	})
}

// StopAPIServer stops kube-apiserver as an orderly shutdown does (SIGTERM;
// SIGKILL after 10 seconds): its clients see their watches end and their
// connections refused. etcd, the data and the node keep running;
// StartAPIServer starts it again. For tests of an API server outage: use a
// control plane of the test's own (Start), not the shared one (Get), whose
// other users would fail meanwhile.
func (cp *ControlPlane) StopAPIServer() { cp.apiserver.stop() }

// KillAPIServer kills kube-apiserver with SIGKILL, as a crash does: its
// clients' connections break without an orderly end.
func (cp *ControlPlane) KillAPIServer() {
	select {
	case <-cp.apiserver.done:
		return
	default:
	}
	syscall.Kill(-cp.apiserver.cmd.Process.Pid, syscall.SIGKILL)
	<-cp.apiserver.done
}

// StartAPIServer starts kube-apiserver again after StopAPIServer or
// KillAPIServer, with the same port, certificates, tokens and etcd data, so
// that every client and kubeconfig keeps working, and waits until it is
// ready. Its output goes to kube-apiserver.N.log in Dir.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	select {
	case <-cp.apiserver.done:
	default:
		return errors.New("start kube-apiserver: it is still running; stop it first")
	}
	cp.apiserverStarts++
	p, err := startProcess(cp.Dir, fmt.Sprintf("kube-apiserver.%d", cp.apiserverStarts), cp.apiserverBin, nil, cp.apiserverArgs...)
	if err != nil {
		return err
	}
	cp.apiserver = p
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return cp.waitAPIServer(ctx)
}

// Stop stops the node, when there is one, kube-apiserver and etcd, and
// removes the directory. With a node it returns an error when the machine
// could not be restored completely (the next node start tries again). It is
// safe to call more than once.
func (cp *ControlPlane) Stop() error {
	if cp == nil {
		return nil
	}
	cp.Node.stopDaemons()
	cp.apiserver.stop()
	cp.etcd.stop()
	var err error
	if cp.host != nil {
		err = cp.host.release()
		cp.host = nil
	}
	if cp.Dir != "" {
		os.RemoveAll(cp.Dir)
	}
	return err
}

func writeKubeconfig(path, host string, caPEM []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testenv"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: user}
	cfg.CurrentContext = "testenv"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

func randomToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// freePort returns a free port on ip below the kernel's ephemeral range
// (32768-60999 by default), so that no bind to port 0, in this process or
// another, is handed the same port before the server binds it. Another test
// could still pick it at random; the server then fails to start and the
// error says so.
func freePort(ip string) int {
	for range 100 {
		port := 20000 + mathrand.IntN(12000)
		if l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port))); err == nil {
			l.Close()
			return port
		}
	}
	panic("find a free port: none free on " + ip + " between 20000 and 32000")
}

// removeStaleDirs removes control plane directories left behind by test
// binaries that no longer run (killed before they could clean up).
func removeStaleDirs() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range matches {
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(filepath.Base(dir), dirPrefix), "-", 2)[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.RemoveAll(dir)
		}
	}
}

// process is a child server process whose output goes to a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	exitErr error
}

// startProcess starts bin with args, its output in dir/name.log, with the
// test binary's environment plus env ("KEY=value").
func startProcess(dir, name, bin string, env []string, args ...string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // signals to the test's process group do not reach it twice
		Pdeathsig: syscall.SIGKILL, // it dies with the test binary, whatever ends it
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.exitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) waitHTTP(ctx context.Context, c *http.Client, url string) error {
	return p.wait(ctx, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	})
}

// wait polls ready until it succeeds, the process exits or ctx ends.
func (p *process) wait(ctx context.Context, ready func(context.Context) error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited during start (%v); last log lines:\n%s", p.name, p.exitErr, p.tail(30))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last check: %v); last log lines:\n%s", p.name, ctx.Err(), last, p.tail(30))
		case <-tick.C:
			attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
			last = ready(attempt)
			cancel()
			if last == nil {
				return nil
			}
		}
	}
}

func (p *process) tail(n int) string {
	data, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stop sends SIGTERM to the process group, then SIGKILL after 10 seconds.
func (p *process) stop() {
	if p == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}
