package gwruntime

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The chaperone's modes and routing sources (ChaperoneFlags.Mode and
// RoutingSource).
const (
	// ModeSupervise: the chaperone is the container's entrypoint and runs
	// varnishd as its child.
	ModeSupervise = "supervise"
	// ModeSidecar: another container runs varnishd (-M to the chaperone,
	// -n on a shared volume); the chaperone steers it and serves the drain
	// socket for that container's preStop hook (chaperone drain).
	ModeSidecar = "sidecar"

	// RoutingFile: ghost.json is written by someone else.
	RoutingFile = "file"
	// RoutingKubernetes: the Gateway's RoutingFragments and endpoints,
	// through informers.
	RoutingKubernetes = "kubernetes"
	// RoutingDir: a standalone directory.
	RoutingDir = "dir"
)

// ChaperoneFlags is the chaperone's command line, defined once for both
// sides: the provider writes a gateway pod's (Args), the chaperone parses
// its own (Register; it adds VARNISHGW_* environment variables and checks
// the result), and the provider reads a live Deployment's back
// (ParseChaperoneArgs). Each field is one flag; the zero value of the
// struct is not the defaults: start from DefaultChaperoneFlags.
type ChaperoneFlags struct {
	Mode    string
	WorkDir string
	Ports   []int
	// TLSPorts are the HTTPS listener ports: hitch, which the chaperone
	// runs in both modes, terminates TLS on them and hands the connections
	// to varnishd's socket port-N, a Unix socket in TLSDir
	// (varnishd.TLSListener), with a PROXY v2 header.
	TLSPorts []int
	// TLSDir holds hitch's configuration, the PEM files (mode 0600) and
	// varnishd's TLS sockets; a memory-backed volume shared with the
	// varnish container in sidecar mode.
	TLSDir   string
	HitchBin string
	// HTTP2 offers HTTP/2 (ALPN h2, then http/1.1) on the HTTPS listeners
	// and turns on varnishd's HTTP/2 (feature=+http2).
	HTTP2 bool
	// ProxyProtocol makes every listener expect the PROXY protocol (v1 or
	// v2) from a load balancer in front of the gateway: varnishd's HTTP
	// listener sockets take it, and each HTTPS port's hitch passes the load
	// balancer's header on to varnishd (proxy-proxy) instead of writing its
	// own. The client's address then reaches X-Forwarded-For and the access
	// log.
	ProxyProtocol  bool
	ListenHost     string
	AdminAddr      string
	SecretFile     string
	GhostAdminAddr string
	HealthAddr     string
	// DrainSocket is the Unix socket `chaperone drain` starts a drain
	// through; empty: none (the chaperone makes DrainSocket the default in
	// sidecar mode).
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
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// RoutingSource is where ghost.json comes from: RoutingFile,
	// RoutingKubernetes or RoutingDir.
	RoutingSource string
	Gateway       string // namespace/name, RoutingKubernetes
	Kubeconfig    string // empty: in-cluster, RoutingKubernetes
	RoutingDir    string // RoutingDir
	// PodName and PodUID name the pod in its GatewayPodReport
	// (RoutingKubernetes); the UID makes the Pod the report's owner.
	PodName, PodUID string
	// InvalidateAddr is the address of the authenticated POST /invalidate
	// endpoint (RoutingKubernetes); empty: none.
	InvalidateAddr string
	// InvalidateTimeout bounds how long POST /invalidate waits for the
	// Gateway's Ready pods to acknowledge.
	InvalidateTimeout time.Duration
	// ExternalNameServices lets routes send traffic to ExternalName
	// Services (RoutingKubernetes): the chaperone resolves their DNS names
	// into endpoints (the class's external_name_services).
	ExternalNameServices bool
	// DNSServers are the DNS servers (host:port) asked for the names of
	// ExternalName Services; empty: the nameservers of /etc/resolv.conf.
	DNSServers []string
	// ExternalNameRefuse are the address prefixes never used as endpoints
	// of ExternalName Services, whatever DNS answers
	// (DefaultExternalNameRefuse).
	ExternalNameRefuse []string
}

// ExternalNameRefuseSelf in the refuse list (--external-name-refuse)
// stands for the pod's own addresses: those of its network interfaces, read
// at every lookup.
const ExternalNameRefuseSelf = "self"

// DefaultExternalNameRefuse are the addresses the names of ExternalName
// Services never resolve to: the pod itself (loopback, where ghost's admin
// socket and the chaperone's admin listener are, and its own interface
// addresses, where its health port is), link-local addresses (among them
// the cloud metadata endpoint 169.254.169.254), the metadata endpoints
// outside it (AWS's IPv6 fd00:ec2::254, Alibaba's 100.100.100.200, Azure's
// wireserver 168.63.129.16), the NAT64 prefix 64:ff9b::/96 (its addresses
// reach any IPv4 address, the refused ones too), unspecified, broadcast and
// multicast addresses.
var DefaultExternalNameRefuse = []string{
	"0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "255.255.255.255/32",
	"100.100.100.200/32", "168.63.129.16/32",
	"::/128", "::1/128", "fe80::/10", "ff00::/8", "fd00:ec2::254/128", "64:ff9b::/96",
	ExternalNameRefuseSelf,
}

// DefaultChaperoneFlags are the values of the flags nobody sets.
func DefaultChaperoneFlags() ChaperoneFlags {
	return ChaperoneFlags{
		Mode:              ModeSupervise,
		WorkDir:           "/var/lib/varnishgw/varnishd",
		AdminAddr:         "127.0.0.1:6082",
		GhostAdminAddr:    "127.0.0.1:6084",
		HealthAddr:        ":9091",
		VCLPath:           "/etc/varnishgw/main.vcl",
		VCLKeep:           3,
		GhostJSONPath:     "/var/lib/varnishgw/ghost.json",
		VarnishdBin:       "/usr/sbin/varnishd",
		TLSDir:            "/run/varnishgw/tls",
		HitchBin:          "/usr/sbin/hitch",
		HTTP2:             true,
		VarnishstatBin:    "varnishstat",
		VarnishncsaBin:    "varnishncsa",
		Storage:           []string{"malloc,256m"},
		DrainTimeout:      5 * time.Minute,
		StatsInterval:     2 * time.Second,
		StatsExclude:      []string{"VBE.*"},
		LogLevel:          "info",
		RoutingSource:     RoutingFile,
		InvalidateTimeout: 30 * time.Second,
		// a copy: the flag's values must not change the default
		ExternalNameRefuse: slices.Clone(DefaultExternalNameRefuse),
	}
}

// ListFlag is a repeated flag (--param, --storage, --stats-exclude,
// --listen). Its first value replaces the default (or what an earlier
// source such as the environment set, after Renew); an empty value empties
// the list.
type ListFlag interface {
	flag.Value
	// Renew makes the next value replace the list instead of adding to it.
	Renew()
}

type stringsFlag struct {
	values *[]string
	added  bool
}

func (l *stringsFlag) String() string {
	if l == nil || l.values == nil {
		return ""
	}
	return strings.Join(*l.values, " ")
}

func (l *stringsFlag) Set(v string) error {
	if !l.added {
		*l.values, l.added = nil, true
	}
	if v != "" {
		*l.values = append(*l.values, v)
	}
	return nil
}

func (l *stringsFlag) Renew() { l.added = false }

type portsFlag struct {
	ports *[]int
	added bool
}

func (p *portsFlag) String() string {
	if p == nil || p.ports == nil {
		return ""
	}
	s := make([]string, len(*p.ports))
	for i, n := range *p.ports {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (p *portsFlag) Set(v string) error {
	if !p.added {
		*p.ports, p.added = nil, true
	}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q is not a port number (1-65535); use e.g. --listen=8080,8443", s)
		}
		*p.ports = append(*p.ports, n)
	}
	return nil
}

func (p *portsFlag) Renew() { p.added = false }

// Register defines every flag on fs, bound to f's fields, with f's values
// as defaults. Its order is the order of Args: where the routing comes
// from, what varnishd runs, then the pod's contract (log level, drain
// timeout, health address). Reordering changes the provider's pod
// template, which restarts every gateway on upgrade.
func (f *ChaperoneFlags) Register(fs *flag.FlagSet) { f.define(fs) }

// define is Register, and returns the flags' names in its order.
func (f *ChaperoneFlags) define(fs *flag.FlagSet) []string {
	var names []string
	str := func(p *string, name, usage string) { fs.StringVar(p, name, *p, usage); names = append(names, name) }
	num := func(p *int, name, usage string) { fs.IntVar(p, name, *p, usage); names = append(names, name) }
	boolean := func(p *bool, name, usage string) { fs.BoolVar(p, name, *p, usage); names = append(names, name) }
	dur := func(p *time.Duration, name, usage string) {
		fs.DurationVar(p, name, *p, usage)
		names = append(names, name)
	}
	val := func(v flag.Value, name, usage string) { fs.Var(v, name, usage); names = append(names, name) }
	str(&f.RoutingSource, "routing", "where routing comes from: file (ghost.json written by someone else), kubernetes (the Gateway's routing fragments and endpoints) or dir (a standalone directory, see design/routing-sync.md)")
	str(&f.Gateway, "gateway", "the Gateway this pod serves, namespace/name (--routing=kubernetes)")
	str(&f.Kubeconfig, "kubeconfig", "kubeconfig file (--routing=kubernetes; empty: the pod's service account)")
	str(&f.RoutingDir, "routing-dir", "directory with gateway.yaml, *.fragment.json and endpoints.yaml (--routing=dir)")
	str(&f.PodName, "pod-name", "the pod's name, which names its GatewayPodReport (--routing=kubernetes; default: the host name)")
	str(&f.PodUID, "pod-uid", "the pod's UID: its GatewayPodReport is deleted with the pod (--routing=kubernetes; empty: no owner)")
	str(&f.VCLPath, "vcl", "main VCL file, reloaded when it changes (empty: VCL comes from the routing source)")
	num(&f.VCLKeep, "vcl-keep", "loaded main VCLs to keep, the active one included")
	str(&f.WorkDir, "workdir", "varnishd working directory (varnishd -n); shared with the varnish container in sidecar mode")
	str(&f.GhostJSONPath, "ghost-json", "ghost.json path, reloaded when it changes")
	str(&f.Mode, "mode", "supervise: run varnishd as a child; sidecar: steer a varnishd another container runs")
	str(&f.SecretFile, "secret-file", "admin secret file shared with the varnish container (sidecar; supervise writes a new one)")
	val(&portsFlag{ports: &f.Ports}, "listen", "Gateway listener port(s), comma separated or repeated; socket names are port-N (supervise)")
	val(&portsFlag{ports: &f.TLSPorts}, "tls-listen", "Gateway HTTPS listener port(s), comma separated or repeated: hitch terminates TLS on them and hands connections to varnishd's socket port-N in --tls-dir (PROXY v2), in both modes")
	str(&f.TLSDir, "tls-dir", "directory of hitch's configuration, the certificates (mode 0600) and varnishd's TLS sockets: memory-backed, shared with the varnish container in sidecar mode")
	str(&f.HitchBin, "hitch", "hitch executable (--tls-listen)")
	boolean(&f.ProxyProtocol, "proxy-protocol", "every listener expects the PROXY protocol (v1 or v2) from a load balancer in front: varnishd's HTTP sockets take it, and hitch passes it on to varnishd on the HTTPS ports (the client's address reaches X-Forwarded-For and the access log)")
	boolean(&f.HTTP2, "http2", "offer HTTP/2 on the HTTPS listeners (ALPN h2, http/1.1) and turn on varnishd's HTTP/2")
	str(&f.ListenHost, "listen-host", "address the listener ports bind to (empty: all)")
	val(&stringsFlag{values: &f.Storage}, "storage", "varnishd -s argument, repeated (default malloc,256m)")
	val(&stringsFlag{values: &f.Params}, "param", "varnishd -p NAME=VALUE, repeated; replaces the gateway's default of the same parameter (thread_pools=1 and a vsl_mask that keeps what the access log reads, see docs/performance.md; e.g. --param=vsl_mask=default for varnishd's own mask)")
	str(&f.ThreadPoolStack, "thread-pool-stack", "varnishd thread_pool_stack (empty: varnishd's default)")
	str(&f.VarnishdBin, "varnishd", "varnishd executable (supervise)")
	str(&f.AdminAddr, "admin-addr", "loopback address the chaperone listens on for varnishd's reverse admin connection (varnishd -M)")
	str(&f.GhostAdminAddr, "ghost-admin-addr", "ghost's loopback admin socket (-a ghost-admin=ADDR)")
	str(&f.DrainSocket, "drain-socket", "Unix socket (mode 0600) through which `chaperone drain` starts a drain, for the varnish container's preStop hook; default "+DrainSocket+" in sidecar mode, none in supervise mode (SIGTERM drains)")
	str(&f.VarnishstatBin, "varnishstat", "varnishstat executable")
	dur(&f.StatsInterval, "stats-interval", "time between varnishstat reads (metrics, child restart detection)")
	val(&stringsFlag{values: &f.StatsExclude}, "stats-exclude", "varnishstat field glob not read for metrics (varnishstat -X), repeated; default VBE.* (per-endpoint counters); empty: read all")
	boolean(&f.AccessLog, "access-log", "write an access log on stdout: one JSON line per client request (route, backend, status, timing, request ID), from a varnishncsa the chaperone runs")
	str(&f.VarnishncsaBin, "varnishncsa", "varnishncsa executable (--access-log)")
	str(&f.LogLevel, "log-level", "debug, info, warn or error")
	dur(&f.DrainTimeout, "drain-timeout", "longest wait for client sessions to close on SIGTERM (keep below terminationGracePeriodSeconds)")
	str(&f.HealthAddr, "health-addr", "address of /healthz, /readyz and /metrics (read only)")
	str(&f.InvalidateAddr, "invalidate-addr", "address of the authenticated POST /invalidate endpoint (--routing=kubernetes; callers need a Kubernetes token allowed to create cacheinvalidations in the Gateway's namespace); empty: none")
	dur(&f.InvalidateTimeout, "invalidate-timeout", "longest wait of POST /invalidate for the acknowledgements of the Gateway's Ready pods")
	boolean(&f.ExternalNameServices, "external-name-services", "let routes send traffic to ExternalName Services (--routing=kubernetes): their DNS names are resolved, again after each TTL (5s to 5m), into endpoints with the backendRef's port; off, such references get 500. Route owners can then send the gateway's traffic wherever DNS points: see docs/guides/external-name-services.md")
	val(&stringsFlag{values: &f.DNSServers}, "dns-server", "DNS server host:port asked for the names of ExternalName Services, repeated (default: the nameservers of /etc/resolv.conf)")
	val(&stringsFlag{values: &f.ExternalNameRefuse}, "external-name-refuse", "address prefix (CIDR), address, or "+ExternalNameRefuseSelf+" (the pod's own interface addresses) never used as an endpoint of an ExternalName Service whatever DNS answers, repeated; default loopback, link-local (cloud metadata 169.254.169.254), the metadata endpoints fd00:ec2::254, 100.100.100.200 and 168.63.129.16, NAT64 64:ff9b::/96, "+ExternalNameRefuseSelf+", unspecified, broadcast and multicast; empty: refuse none")
	return names
}

// Args is f's command line, in Register's order: every flag whose value
// differs from DefaultChaperoneFlags, and the flags named in always even
// at their default (what the pod around the chaperone depends on, such as
// the health address its probes call, so that a chaperone of another
// release with other defaults still fits). A list flag is written once per
// value (an emptied list as --name=), a true bool as --name, a duration of
// whole seconds in seconds (--drain-timeout=300s).
func (f ChaperoneFlags) Args(always ...string) []string {
	def := DefaultChaperoneFlags()
	defs := flag.NewFlagSet("chaperone", flag.ContinueOnError)
	def.Register(defs)
	cur := flag.NewFlagSet("chaperone", flag.ContinueOnError)
	var args []string
	for _, name := range f.define(cur) {
		c := cur.Lookup(name)
		if c.Value.String() == defs.Lookup(name).Value.String() && !slices.Contains(always, name) {
			continue
		}
		switch v := c.Value.(type) {
		case *stringsFlag:
			if len(*v.values) == 0 {
				args = append(args, "--"+name+"=")
			}
			for _, s := range *v.values {
				args = append(args, "--"+name+"="+s)
			}
			continue
		case flag.Getter:
			switch g := v.Get().(type) {
			case bool:
				if g {
					args = append(args, "--"+name)
					continue
				}
			case time.Duration:
				if g%time.Second == 0 {
					args = append(args, fmt.Sprintf("--%s=%ds", name, g/time.Second))
					continue
				}
			}
		}
		args = append(args, "--"+name+"="+c.Value.String())
	}
	return args
}

// ParseChaperoneArgs parses a chaperone command line (a container's args)
// on top of the defaults, without the chaperone's checks.
func ParseChaperoneArgs(args []string) (ChaperoneFlags, error) {
	f := DefaultChaperoneFlags()
	fs := flag.NewFlagSet("chaperone", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.Register(fs)
	if err := fs.Parse(args); err != nil {
		return f, fmt.Errorf("parse the chaperone's arguments %q: %w", args, err)
	}
	return f, nil
}
