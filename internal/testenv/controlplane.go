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

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/cert"
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
	// StartTimeout bounds the whole start, CRDs included (default 2 minutes).
	StartTimeout time.Duration
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

	etcd, apiserver *process
	etcdURL         string
	caPEM           []byte
}

// Start starts etcd and kube-apiserver in a new temporary directory, installs
// the Gateway API CRDs and waits until they are served. Call Stop when done.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	removeStaleDirs()
	dir, err := os.MkdirTemp("", dirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("create control plane dir: %w", err)
	}
	cp := &ControlPlane{Dir: dir}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()

	if err := cp.startEtcd(ctx, opts.EtcdPath); err != nil {
		return nil, err
	}
	if err := cp.startAPIServer(ctx, opts.KubeAPIServerPath); err != nil {
		return nil, err
	}
	if err := installCRDs(ctx, apiextensionsclient.NewForConfigOrDie(cp.Config), cp.Client, opts.CRDDir); err != nil {
		return nil, err
	}
	return cp, nil
}

func (o Options) withDefaults() (Options, error) {
	fromEnv := func(field *string, env string) error {
		if *field == "" {
			*field = os.Getenv(env)
		}
		if *field == "" {
			return fmt.Errorf("start control plane: %s is not set; run `make setup` and use `make test`, or export the variables in bin/tools.env", env)
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
	if o.StartTimeout == 0 {
		o.StartTimeout = 2 * time.Minute
	}
	return o, nil
}

func (cp *ControlPlane) startEtcd(ctx context.Context, bin string) error {
	clientURL := "http://127.0.0.1:" + strconv.Itoa(freePort())
	peerURL := "http://127.0.0.1:" + strconv.Itoa(freePort())
	cp.etcdURL = clientURL
	var err error
	cp.etcd, err = startProcess(cp.Dir, "etcd", bin,
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
	pki := filepath.Join(cp.Dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return fmt.Errorf("create pki dir: %w", err)
	}
	// A serving certificate for 127.0.0.1 with its own CA in the chain.
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	if err != nil {
		return fmt.Errorf("generate serving certificate: %w", err)
	}
	saKey, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		return fmt.Errorf("generate service account key: %w", err)
	}
	token := randomToken()
	files := map[string][]byte{
		"serving.crt": certPEM,
		"serving.key": keyPEM,
		"sa.key":      saKey,
		"tokens.csv":  []byte(token + ",admin,admin,system:masters\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(pki, name), data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}

	port := freePort()
	host := "https://127.0.0.1:" + strconv.Itoa(port)
	cp.apiserver, err = startProcess(cp.Dir, "kube-apiserver", bin,
		"--etcd-servers="+cp.etcdURL,
		"--etcd-prefix=/registry",
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--tls-cert-file="+filepath.Join(pki, "serving.crt"),
		"--tls-private-key-file="+filepath.Join(pki, "serving.key"),
		"--cert-dir="+pki,
		"--authorization-mode=RBAC",
		"--token-auth-file="+filepath.Join(pki, "tokens.csv"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(pki, "sa.key"),
		"--service-account-signing-key-file="+filepath.Join(pki, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16",
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--v=0",
	)
	if err != nil {
		return err
	}

	cp.caPEM = certPEM
	cp.Config = &rest.Config{
		Host:            host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: certPEM},
		QPS:             200,
		Burst:           400,
	}
	cp.Kubeconfig = filepath.Join(cp.Dir, "admin.kubeconfig")
	if err := writeKubeconfig(cp.Kubeconfig, host, certPEM, "admin", token); err != nil {
		return err
	}
	if cp.Client, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	if cp.Gateway, err = gatewayclient.NewForConfig(cp.Config); err != nil {
		return fmt.Errorf("admin gateway client: %w", err)
	}
	return cp.apiserver.wait(ctx, func(ctx context.Context) error {
		body, err := cp.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%w: %s", err, body)
		}
		return nil
	})
}

// Stop stops kube-apiserver and etcd and removes the directory. It is safe to
// call more than once.
func (cp *ControlPlane) Stop() {
	if cp == nil {
		return
	}
	cp.apiserver.stop()
	cp.etcd.stop()
	if cp.Dir != "" {
		os.RemoveAll(cp.Dir)
	}
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

// freePort returns a free loopback port below the kernel's ephemeral range
// (32768-60999 by default), so that no bind to port 0, in this process or
// another, is handed the same port before the server binds it. Another test
// could still pick it at random; the server then fails to start and the
// error says so.
func freePort() int {
	for range 100 {
		port := 20000 + mathrand.IntN(12000)
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			l.Close()
			return port
		}
	}
	panic("find a free port: none free between 20000 and 32000")
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

func startProcess(dir, name, bin string, args ...string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
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
