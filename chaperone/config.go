package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/chaperone/drain"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

// The modes the chaperone runs in.
const (
	// ModeSupervise: the chaperone is the container's entrypoint and runs
	// varnishd as its child.
	ModeSupervise = "supervise"
	// ModeSidecar: another container runs varnishd (-M to the chaperone,
	// -n on a shared volume); the chaperone steers it and serves the drain
	// socket for that container's preStop hook (chaperone drain).
	ModeSidecar = "sidecar"
)

// Config is the chaperone's configuration, from flags and VARNISHGW_*
// environment variables (a flag wins over its variable).
type Config struct {
	Mode           string
	WorkDir        string
	ListenHost     string
	Ports          []int
	AdminAddr      string
	SecretFile     string
	GhostAdminAddr string
	HealthAddr     string
	// DrainSocket is the Unix socket `chaperone drain` starts a drain
	// through; empty: none (supervise mode's default: SIGTERM drains).
	DrainSocket    string
	VCLPath        string
	VCLKeep        int
	GhostJSONPath  string
	VarnishdBin    string
	VarnishstatBin string
	// AccessLog writes one JSON line per client request on stdout,
	// through a varnishncsa the chaperone runs (VarnishncsaBin).
	AccessLog       bool
	VarnishncsaBin  string
	Storage         []string
	Params          []string
	ThreadPoolStack string
	DrainTimeout    time.Duration
	StatsInterval   time.Duration
	// StatsExclude are varnishstat field globs not read (varnishstat -X).
	StatsExclude []string
	LogLevel     slog.Level

	// RoutingSource is where ghost.json comes from: RoutingFile (written by
	// someone else), RoutingKubernetes (the Gateway's fragments and
	// endpoints through informers) or RoutingDir (a standalone directory).
	RoutingSource string
	Gateway       string // namespace/name, RoutingKubernetes
	Kubeconfig    string // empty: in-cluster, RoutingKubernetes
	RoutingDir    string // RoutingDir
	// PodName and PodUID name the pod in its GatewayPodReport
	// (RoutingKubernetes); the UID makes the Pod the report's owner.
	PodName, PodUID string
}

// Routing sources.
const (
	RoutingFile       = "file"
	RoutingKubernetes = "kubernetes"
	RoutingDir        = "dir"
)

// listFlag is a flag that may be repeated; from the environment its values
// are separated by white space.
type listFlag struct{ values *[]string }

func (l listFlag) String() string {
	if l.values == nil {
		return ""
	}
	return strings.Join(*l.values, " ")
}

func (l listFlag) Set(v string) error {
	*l.values = append(*l.values, v)
	return nil
}

// envName is the environment variable of a flag: --drain-timeout is
// VARNISHGW_DRAIN_TIMEOUT.
func envName(flagName string) string {
	return "VARNISHGW_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// ParseConfig reads args (without the program name) and env (KEY=VALUE
// pairs) into a validated Config. Usage and errors go to out.
func ParseConfig(args, env []string, out io.Writer) (*Config, error) {
	c := &Config{}
	fs := flag.NewFlagSet("chaperone", flag.ContinueOnError)
	fs.SetOutput(out)
	var ports, storage, params, statsExclude []string
	var logLevel string
	fs.StringVar(&c.Mode, "mode", ModeSupervise, "supervise: run varnishd as a child; sidecar: steer a varnishd another container runs")
	fs.StringVar(&c.WorkDir, "workdir", "/var/lib/varnishgw/varnishd", "varnishd working directory (varnishd -n); shared with the varnish container in sidecar mode")
	fs.Var(listFlag{&ports}, "listen", "Gateway listener port(s), comma separated or repeated; socket names are port-N (supervise)")
	fs.StringVar(&c.ListenHost, "listen-host", "", "address the listener ports bind to (empty: all)")
	fs.StringVar(&c.AdminAddr, "admin-addr", "127.0.0.1:6082", "loopback address the chaperone listens on for varnishd's reverse admin connection (varnishd -M)")
	fs.StringVar(&c.SecretFile, "secret-file", "", "admin secret file shared with the varnish container (sidecar; supervise writes a new one)")
	fs.StringVar(&c.GhostAdminAddr, "ghost-admin-addr", "127.0.0.1:6084", "ghost's loopback admin socket (-a ghost-admin=ADDR)")
	fs.StringVar(&c.HealthAddr, "health-addr", ":9091", "address of /healthz, /readyz and /metrics (read only)")
	fs.StringVar(&c.DrainSocket, "drain-socket", "", "Unix socket (mode 0600) through which `chaperone drain` starts a drain, for the varnish container's preStop hook; default "+drain.DefaultSocket+" in sidecar mode, none in supervise mode (SIGTERM drains)")
	fs.StringVar(&c.VCLPath, "vcl", "/etc/varnishgw/main.vcl", "main VCL file, reloaded when it changes (empty: VCL comes from the routing source)")
	fs.IntVar(&c.VCLKeep, "vcl-keep", 3, "loaded main VCLs to keep, the active one included")
	fs.StringVar(&c.GhostJSONPath, "ghost-json", "/var/lib/varnishgw/ghost.json", "ghost.json path, reloaded when it changes")
	fs.StringVar(&c.VarnishdBin, "varnishd", "/usr/sbin/varnishd", "varnishd executable (supervise)")
	fs.StringVar(&c.VarnishstatBin, "varnishstat", "varnishstat", "varnishstat executable")
	fs.BoolVar(&c.AccessLog, "access-log", false, "write an access log on stdout: one JSON line per client request (route, backend, status, timing, request ID), from a varnishncsa the chaperone runs")
	fs.StringVar(&c.VarnishncsaBin, "varnishncsa", "varnishncsa", "varnishncsa executable (--access-log)")
	fs.Var(listFlag{&storage}, "storage", "varnishd -s argument, repeated (default malloc,256m)")
	fs.Var(listFlag{&params}, "param", "varnishd -p NAME=VALUE, repeated")
	fs.StringVar(&c.ThreadPoolStack, "thread-pool-stack", "", "varnishd thread_pool_stack (empty: varnishd's default)")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", 5*time.Minute, "longest wait for client sessions to close on SIGTERM (keep below terminationGracePeriodSeconds)")
	fs.DurationVar(&c.StatsInterval, "stats-interval", 2*time.Second, "time between varnishstat reads (metrics, child restart detection)")
	fs.Var(listFlag{&statsExclude}, "stats-exclude", "varnishstat field glob not read for metrics (varnishstat -X), repeated; default VBE.* (per-endpoint counters); empty: read all")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.RoutingSource, "routing", RoutingFile, "where routing comes from: file (ghost.json written by someone else), kubernetes (the Gateway's routing fragments and endpoints) or dir (a standalone directory, see docs/routing-sync.md)")
	fs.StringVar(&c.Gateway, "gateway", "", "the Gateway this pod serves, namespace/name (--routing=kubernetes)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig file (--routing=kubernetes; empty: the pod's service account)")
	fs.StringVar(&c.RoutingDir, "routing-dir", "", "directory with gateway.yaml, *.fragment.json and endpoints.yaml (--routing=dir)")
	fs.StringVar(&c.PodName, "pod-name", "", "the pod's name, which names its GatewayPodReport (--routing=kubernetes; default: the host name)")
	fs.StringVar(&c.PodUID, "pod-uid", "", "the pod's UID: its GatewayPodReport is deleted with the pod (--routing=kubernetes; empty: no owner)")

	// Environment first, flags override.
	envMap := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			envMap[k] = v
		}
	}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		v, ok := envMap[envName(f.Name)]
		if !ok {
			return
		}
		values := []string{v}
		if _, isList := f.Value.(listFlag); isList {
			values = strings.Fields(v)
		}
		for _, v := range values {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %v", envName(f.Name), v, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// A flag replaces the environment's list instead of adding to it.
	envPorts, envStorage, envParams, envExclude := len(ports), len(storage), len(params), len(statsExclude)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: the chaperone takes flags only", fs.Arg(0))
	}
	ports = dropEnvIfFlagged(ports, envPorts)
	storage = dropEnvIfFlagged(storage, envStorage)
	params = dropEnvIfFlagged(params, envParams)
	statsExclude = dropEnvIfFlagged(statsExclude, envExclude)
	excludeSet, drainSocketSet := false, false
	fs.Visit(func(f *flag.Flag) {
		excludeSet = excludeSet || f.Name == "stats-exclude"
		drainSocketSet = drainSocketSet || f.Name == "drain-socket"
	})
	if _, ok := envMap[envName("stats-exclude")]; ok {
		excludeSet = true
	}
	if _, ok := envMap[envName("drain-socket")]; ok {
		drainSocketSet = true
	}
	if !drainSocketSet && c.Mode == ModeSidecar {
		c.DrainSocket = drain.DefaultSocket
	}
	if !excludeSet {
		statsExclude = []string{"VBE.*"}
	}
	for _, g := range statsExclude {
		if g = strings.TrimSpace(g); g != "" {
			c.StatsExclude = append(c.StatsExclude, g)
		}
	}
	if len(storage) == 0 {
		storage = []string{"malloc,256m"}
	}
	if c.PodName == "" {
		c.PodName, _ = os.Hostname()
	}
	c.Storage, c.Params = storage, params
	if err := c.LogLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level=%q: want debug, info, warn or error", logLevel)
	}
	for _, p := range ports {
		for _, s := range strings.Split(p, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 65535 {
				return nil, fmt.Errorf("--listen=%q: %q is not a port number (1-65535); use e.g. --listen=8080,8443", p, s)
			}
			c.Ports = append(c.Ports, n)
		}
	}
	return c, c.validate()
}

func dropEnvIfFlagged(values []string, fromEnv int) []string {
	if len(values) > fromEnv && fromEnv > 0 {
		return values[fromEnv:]
	}
	return values
}

func (c *Config) validate() error {
	switch c.Mode {
	case ModeSupervise:
		if len(c.Ports) == 0 {
			return errors.New("--listen is empty: name at least one Gateway listener port, e.g. --listen=8080 (or VARNISHGW_LISTEN=8080)")
		}
		if c.VarnishdBin == "" {
			return errors.New("--varnishd is empty: give the varnishd executable, e.g. --varnishd=/usr/sbin/varnishd")
		}
	case ModeSidecar:
		if c.SecretFile == "" {
			return errors.New("--secret-file is empty: sidecar mode needs the admin secret file the varnish container passes to varnishd -S")
		}
		if c.DrainSocket == "" {
			return fmt.Errorf("--drain-socket is empty: sidecar mode needs the drain socket for the varnish container's preStop hook (chaperone drain); leave the flag out for %s", drain.DefaultSocket)
		}
	default:
		return fmt.Errorf("--mode=%q: want %s or %s", c.Mode, ModeSupervise, ModeSidecar)
	}
	if c.WorkDir == "" || !filepath.IsAbs(c.WorkDir) {
		return fmt.Errorf("--workdir=%q: want an absolute directory, e.g. --workdir=/var/lib/varnishgw/varnishd", c.WorkDir)
	}
	if err := loopback("--admin-addr", c.AdminAddr); err != nil {
		return err
	}
	if err := loopback("--ghost-admin-addr", c.GhostAdminAddr); err != nil {
		return err
	}
	if c.DrainSocket != "" {
		if err := drain.CheckSocketPath(c.DrainSocket); err != nil {
			return fmt.Errorf("--drain-socket=%q: %v; use an absolute path on the volume the varnish container shares, e.g. --drain-socket=%s", c.DrainSocket, err, drain.DefaultSocket)
		}
	}
	if _, _, err := net.SplitHostPort(c.HealthAddr); err != nil {
		return fmt.Errorf("--health-addr=%q: %v; use host:port, e.g. --health-addr=:9091", c.HealthAddr, err)
	}
	if c.VCLKeep < 1 {
		return fmt.Errorf("--vcl-keep=%d: keep at least the active VCL (1 or more)", c.VCLKeep)
	}
	if c.GhostJSONPath == "" {
		return errors.New("--ghost-json is empty: give the path of ghost.json, e.g. --ghost-json=/var/lib/varnishgw/ghost.json")
	}
	if c.DrainTimeout < 0 {
		return fmt.Errorf("--drain-timeout=%s: want 0 (no limit) or more", c.DrainTimeout)
	}
	if c.StatsInterval < 100*time.Millisecond {
		return fmt.Errorf("--stats-interval=%s: want at least 100ms", c.StatsInterval)
	}
	switch c.RoutingSource {
	case RoutingFile:
	case RoutingKubernetes:
		if ns, name, ok := strings.Cut(c.Gateway, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("--gateway=%q: want namespace/name of the Gateway this pod serves, e.g. --gateway=edge/public", c.Gateway)
		}
	case RoutingDir:
		if c.RoutingDir == "" {
			return errors.New("--routing-dir is empty: --routing=dir needs the directory to watch, e.g. --routing-dir=/etc/varnishgw/routing")
		}
	default:
		return fmt.Errorf("--routing=%q: want %s, %s or %s", c.RoutingSource, RoutingFile, RoutingKubernetes, RoutingDir)
	}
	if c.VCLPath == "" && c.RoutingSource != RoutingKubernetes {
		return fmt.Errorf("--vcl is empty with --routing=%s: only --routing=kubernetes brings main.vcl (from the Gateway's VCL ConfigMap); give the main VCL file, e.g. --vcl=/etc/varnishgw/main.vcl", c.RoutingSource)
	}
	for _, p := range c.Params {
		if name, _, ok := strings.Cut(p, "="); !ok || name == "" {
			return fmt.Errorf("--param=%q: want NAME=VALUE, e.g. --param=timeout_idle=10", p)
		}
	}
	return nil
}

// loopback checks that addr is host:port on a loopback address.
func loopback(flagName, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s=%q: %v; use a loopback host:port, e.g. 127.0.0.1:6082", flagName, addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s=%q: %q is not a loopback address; the admin sockets must not be reachable from outside the pod, use 127.0.0.1", flagName, addr, host)
	}
	if _, err := strconv.Atoi(port); err != nil {
		return fmt.Errorf("%s=%q: port %q is not a number", flagName, addr, port)
	}
	return nil
}

// Listeners returns varnishd's client sockets, one per port, named by
// routing.SocketName.
func (c *Config) Listeners() []varnishd.Listener {
	var ls []varnishd.Listener
	for _, p := range c.Ports {
		ls = append(ls, varnishd.Listener{
			Name: routing.SocketName(gatewayv1.PortNumber(p)),
			Addr: net.JoinHostPort(c.ListenHost, strconv.Itoa(p)),
		})
	}
	return ls
}

// readSecret reads the sidecar's shared admin secret.
func (c *Config) readSecret() ([]byte, error) {
	b, err := os.ReadFile(c.SecretFile)
	if err != nil {
		return nil, fmt.Errorf("read --secret-file: %w", err)
	}
	return b, nil
}
