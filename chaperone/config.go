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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/dnswatch"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/drain"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

// The chaperone's modes and routing sources, named once in gwruntime.
const (
	ModeSupervise     = gwruntime.ModeSupervise
	ModeSidecar       = gwruntime.ModeSidecar
	RoutingFile       = gwruntime.RoutingFile
	RoutingKubernetes = gwruntime.RoutingKubernetes
	RoutingDir        = gwruntime.RoutingDir
)

// Config is the chaperone's configuration, from flags and VARNISHGW_*
// environment variables (a flag wins over its variable). The flags are
// gwruntime.ChaperoneFlags, the same type the provider writes a gateway
// pod's arguments from.
type Config struct {
	gwruntime.ChaperoneFlags
	// Level is LogLevel parsed.
	Level slog.Level
}

// envName is the environment variable of a flag: --drain-timeout is
// VARNISHGW_DRAIN_TIMEOUT.
func envName(flagName string) string {
	return "VARNISHGW_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// ParseConfig reads args (without the program name) and env (KEY=VALUE
// pairs) into a validated Config. Usage and errors go to out.
func ParseConfig(args, env []string, out io.Writer) (*Config, error) {
	c := &Config{ChaperoneFlags: gwruntime.DefaultChaperoneFlags()}
	fs := flag.NewFlagSet("chaperone", flag.ContinueOnError)
	fs.SetOutput(out)
	c.Register(fs)

	// Environment first (a list's values separated by white space), flags
	// override: a list flag replaces the environment's list.
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
		list, isList := f.Value.(gwruntime.ListFlag)
		if isList {
			values = strings.Fields(v)
			if len(values) == 0 {
				values = []string{""} // VARNISHGW_STATS_EXCLUDE= empties the list
			}
		}
		for _, v := range values {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %v", envName(f.Name), v, err))
			}
		}
		if isList {
			list.Renew()
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: the chaperone takes flags only", fs.Arg(0))
	}
	drainSocketSet := false
	fs.Visit(func(f *flag.Flag) { drainSocketSet = drainSocketSet || f.Name == "drain-socket" })
	if _, ok := envMap[envName("drain-socket")]; ok {
		drainSocketSet = true
	}
	if !drainSocketSet && c.Mode == ModeSidecar {
		c.DrainSocket = drain.DefaultSocket
	}
	c.StatsExclude = slices.DeleteFunc(c.StatsExclude, func(g string) bool { return strings.TrimSpace(g) == "" })
	if len(c.Storage) == 0 {
		c.Storage = gwruntime.DefaultChaperoneFlags().Storage
	}
	if c.PodName == "" {
		c.PodName, _ = os.Hostname()
	}
	if err := c.Level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return nil, fmt.Errorf("--log-level=%q: want debug, info, warn or error", c.LogLevel)
	}
	return c, c.validate()
}

func (c *Config) validate() error {
	switch c.Mode {
	case ModeSupervise:
		if len(c.Ports) == 0 && len(c.TLSPorts) == 0 {
			return errors.New("--listen and --tls-listen are empty: name at least one Gateway listener port, e.g. --listen=8080 (or VARNISHGW_LISTEN=8080)")
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
	if c.InvalidateAddr != "" {
		if _, _, err := net.SplitHostPort(c.InvalidateAddr); err != nil {
			return fmt.Errorf("--invalidate-addr=%q: %v; use host:port, e.g. --invalidate-addr=:9092", c.InvalidateAddr, err)
		}
		if c.RoutingSource != RoutingKubernetes {
			return fmt.Errorf("--invalidate-addr=%q needs --routing=kubernetes: the endpoint creates CacheInvalidations through the API; leave it empty with --routing=%s", c.InvalidateAddr, c.RoutingSource)
		}
		if c.InvalidateAddr == c.HealthAddr {
			return fmt.Errorf("--invalidate-addr=%q is --health-addr too: the health server is read only; give the endpoint a port of its own, e.g. :9092", c.InvalidateAddr)
		}
	}
	if c.InvalidateTimeout <= 0 {
		return fmt.Errorf("--invalidate-timeout=%s: want a positive duration, e.g. 30s", c.InvalidateTimeout)
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
	if c.ExternalNameServices && c.RoutingSource != RoutingKubernetes {
		return fmt.Errorf("--external-name-services with --routing=%s: ExternalName Services are Kubernetes objects; use --routing=%s or leave the flag out", c.RoutingSource, RoutingKubernetes)
	}
	if len(c.DNSServers) > 0 && !c.ExternalNameServices {
		return fmt.Errorf("--dns-server=%s without --external-name-services: the DNS servers are asked only for the names of ExternalName Services; add --external-name-services or leave --dns-server out", strings.Join(c.DNSServers, ","))
	}
	for _, s := range c.DNSServers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("--dns-server=%q: %v; use host:port, e.g. --dns-server=10.96.0.10:53", s, err)
		}
	}
	if _, err := dnswatch.ParseRefuse(c.ExternalNameRefuse); err != nil {
		return fmt.Errorf("--external-name-refuse: %w", err)
	}
	if c.VCLPath == "" && c.RoutingSource != RoutingKubernetes {
		return fmt.Errorf("--vcl is empty with --routing=%s: only --routing=kubernetes brings main.vcl (from the Gateway's VCL ConfigMap); give the main VCL file, e.g. --vcl=/etc/varnishgw/main.vcl", c.RoutingSource)
	}
	for _, p := range c.Params {
		if name, _, ok := strings.Cut(p, "="); !ok || name == "" {
			return fmt.Errorf("--param=%q: want NAME=VALUE, e.g. --param=timeout_idle=10", p)
		}
	}
	return c.validateTLS()
}

// validateTLS checks the HTTPS flags.
func (c *Config) validateTLS() error {
	if len(c.TLSPorts) == 0 {
		return nil
	}
	for _, p := range c.TLSPorts {
		if slices.Contains(c.Ports, p) {
			return fmt.Errorf("--tls-listen=%d is in --listen too: a port is HTTP or HTTPS; remove it from one of them", p)
		}
	}
	if c.RoutingSource == RoutingFile {
		return fmt.Errorf("--tls-listen=%v with --routing=%s: the certificates come from the Secrets the Gateway's HTTPS listeners name; use --routing=%s or --routing=%s", c.TLSPorts, RoutingFile, RoutingKubernetes, RoutingDir)
	}
	if !filepath.IsAbs(c.TLSDir) {
		return fmt.Errorf("--tls-dir=%q: want an absolute directory on a memory-backed volume, e.g. --tls-dir=/run/varnishgw/tls", c.TLSDir)
	}
	// varnishd's sockets are <tls-dir>/port-N.sock: a Unix socket path
	// has at most 107 bytes.
	if l := len(varnishd.TLSListener(c.TLSDir, 65535).Addr); l > 107 {
		return fmt.Errorf("--tls-dir=%q is too long for Unix socket paths (%d bytes with port-65535.sock, at most 107): use a shorter directory, e.g. /run/varnishgw/tls", c.TLSDir, l)
	}
	if c.HitchBin == "" {
		return errors.New("--hitch is empty with --tls-listen: give the hitch executable, e.g. --hitch=/usr/sbin/hitch")
	}
	return nil
}

// VarnishParams returns varnishd's -p parameters: the gateway's defaults
// (varnishd.DefaultParams) but those --param sets, --param, and
// feature=+http2 when --http2 is on and there are HTTPS ports (HTTP/2 is
// offered only through TLS, by ALPN; the cleartext ports stay HTTP/1.1).
func (c *Config) VarnishParams() []string {
	ps := varnishd.WithDefaults(c.Params)
	if c.HTTP2 && len(c.TLSPorts) > 0 {
		ps = append(ps, "feature=+http2")
	}
	return ps
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
// ghostjson.SocketName: TCP for the HTTP ports (with --proxy-protocol they
// take the PROXY protocol of the load balancer in front), and for each
// HTTPS port the Unix socket in --tls-dir hitch hands its connections to
// (varnishd.TLSListener).
func (c *Config) Listeners() []varnishd.Listener {
	var ls []varnishd.Listener
	for _, p := range c.Ports {
		ls = append(ls, varnishd.Listener{
			Name:  ghostjson.SocketName(p),
			Addr:  net.JoinHostPort(c.ListenHost, strconv.Itoa(p)),
			Proxy: c.ProxyProtocol,
		})
	}
	for _, p := range c.TLSPorts {
		ls = append(ls, varnishd.TLSListener(c.TLSDir, p))
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
