package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     []string
		wantErr string // substring; "" for success
		check   func(t *testing.T, c *Config)
	}{
		{name: "defaults with one port", args: []string{"--listen=8080"}, check: func(t *testing.T, c *Config) {
			if c.Mode != ModeSupervise || c.DrainTimeout != 5*time.Minute || !slices.Equal(c.Storage, []string{"malloc,256m"}) {
				t.Errorf("defaults: %+v", c)
			}
			ls := c.Listeners()
			if len(ls) != 1 || ls[0].Name != "port-8080" || ls[0].Addr != ":8080" {
				t.Errorf("Listeners = %+v, want port-8080 on :8080", ls)
			}
		}},
		{name: "ports comma separated and repeated", args: []string{"--listen=80,443", "--listen", "8080"}, check: func(t *testing.T, c *Config) {
			if !slices.Equal(c.Ports, []int{80, 443, 8080}) {
				t.Errorf("Ports = %v", c.Ports)
			}
		}},
		{name: "environment", env: []string{"VARNISHGW_LISTEN=80,8080", "VARNISHGW_PARAM=timeout_idle=10 http_max_hdr=128",
			"VARNISHGW_STORAGE=malloc,1g", "VARNISHGW_DRAIN_TIMEOUT=30s", "VARNISHGW_MODE=supervise"}, check: func(t *testing.T, c *Config) {
			if !slices.Equal(c.Ports, []int{80, 8080}) || !slices.Equal(c.Params, []string{"timeout_idle=10", "http_max_hdr=128"}) ||
				!slices.Equal(c.Storage, []string{"malloc,1g"}) || c.DrainTimeout != 30*time.Second {
				t.Errorf("from env: %+v", c)
			}
		}},
		{name: "a flag replaces the environment's list", args: []string{"--param=a=1"}, env: []string{"VARNISHGW_LISTEN=80", "VARNISHGW_PARAM=b=2"},
			check: func(t *testing.T, c *Config) {
				if !slices.Equal(c.Params, []string{"a=1"}) {
					t.Errorf("Params = %v, want the flag's only", c.Params)
				}
			}},
		{name: "flag wins over environment", args: []string{"--drain-timeout=1m"}, env: []string{"VARNISHGW_LISTEN=80", "VARNISHGW_DRAIN_TIMEOUT=30s"},
			check: func(t *testing.T, c *Config) {
				if c.DrainTimeout != time.Minute {
					t.Errorf("DrainTimeout = %s, want 1m", c.DrainTimeout)
				}
			}},
		{name: "stats exclude default", args: []string{"--listen=80"}, check: func(t *testing.T, c *Config) {
			if !slices.Equal(c.StatsExclude, []string{"VBE.*"}) {
				t.Errorf("StatsExclude = %q, want VBE.*", c.StatsExclude)
			}
		}},
		{name: "stats exclude empty reads all", args: []string{"--listen=80", "--stats-exclude="}, check: func(t *testing.T, c *Config) {
			if len(c.StatsExclude) != 0 {
				t.Errorf("StatsExclude = %q, want none", c.StatsExclude)
			}
		}},
		{name: "stats exclude from env", env: []string{"VARNISHGW_LISTEN=80", "VARNISHGW_STATS_EXCLUDE=VBE.* LCK.*"}, check: func(t *testing.T, c *Config) {
			if !slices.Equal(c.StatsExclude, []string{"VBE.*", "LCK.*"}) {
				t.Errorf("StatsExclude = %q", c.StatsExclude)
			}
		}},
		{name: "invalidate endpoint needs kubernetes", args: []string{"--listen=80", "--invalidate-addr=:9092"}, wantErr: "--invalidate-addr=\":9092\" needs --routing=kubernetes"},
		{name: "invalidate endpoint not on the health server", args: []string{"--listen=80", "--routing=kubernetes", "--gateway=a/b", "--invalidate-addr=:9091"}, wantErr: "the health server is read only"},
		{name: "invalidate endpoint address", args: []string{"--listen=80", "--routing=kubernetes", "--gateway=a/b", "--invalidate-addr=9092"}, wantErr: "--invalidate-addr=\"9092\": address 9092: missing port"},
		{name: "invalidate timeout", args: []string{"--listen=80", "--invalidate-timeout=0s"}, wantErr: "--invalidate-timeout=0s: want a positive duration"},
		{name: "invalidate endpoint", args: []string{"--listen=80", "--routing=kubernetes", "--gateway=a/b", "--invalidate-addr=:9092"}, check: func(t *testing.T, c *Config) {
			if c.InvalidateAddr != ":9092" || c.InvalidateTimeout != 30*time.Second {
				t.Errorf("InvalidateAddr = %q, InvalidateTimeout = %s", c.InvalidateAddr, c.InvalidateTimeout)
			}
		}},
		{name: "external names need kubernetes", args: []string{"--listen=80", "--external-name-services"}, wantErr: "--external-name-services with --routing=file: ExternalName Services are Kubernetes objects"},
		{name: "dns server without external names", args: []string{"--listen=80", "--routing=kubernetes", "--gateway=a/b", "--dns-server=10.0.0.10:53"}, wantErr: "--dns-server=10.0.0.10:53 without --external-name-services"},
		{name: "dns server address", args: []string{"--listen=80", "--routing=kubernetes", "--gateway=a/b", "--external-name-services", "--dns-server=10.0.0.10"}, wantErr: `--dns-server="10.0.0.10": address 10.0.0.10: missing port`},
		{name: "refused prefix", args: []string{"--listen=80", "--external-name-refuse=10.0.0.0/40"}, wantErr: `--external-name-refuse: "10.0.0.0/40" is not an address prefix`},
		{name: "external names", args: []string{"--listen=80", "--routing=kubernetes", "--gateway=a/b", "--external-name-services", "--dns-server=127.0.0.1:5353", "--external-name-refuse=169.254.0.0/16"}, check: func(t *testing.T, c *Config) {
			if !c.ExternalNameServices || !slices.Equal(c.DNSServers, []string{"127.0.0.1:5353"}) || !slices.Equal(c.ExternalNameRefuse, []string{"169.254.0.0/16"}) {
				t.Errorf("ExternalNameServices = %v, DNSServers = %q, ExternalNameRefuse = %q", c.ExternalNameServices, c.DNSServers, c.ExternalNameRefuse)
			}
		}},
		{name: "external names refuse by default", args: []string{"--listen=80"}, check: func(t *testing.T, c *Config) {
			if c.ExternalNameServices || !slices.Contains(c.ExternalNameRefuse, "169.254.0.0/16") || !slices.Contains(c.ExternalNameRefuse, "127.0.0.0/8") {
				t.Errorf("ExternalNameServices = %v, ExternalNameRefuse = %q", c.ExternalNameServices, c.ExternalNameRefuse)
			}
		}},
		{name: "empty vcl without kubernetes", args: []string{"--listen=80", "--vcl="}, wantErr: "--vcl is empty with --routing=file"},
		{name: "empty vcl with kubernetes", args: []string{"--listen=80", "--vcl=", "--routing=kubernetes", "--gateway=edge/public"}, check: func(t *testing.T, c *Config) {
			if c.VCLPath != "" {
				t.Errorf("VCLPath = %q, want empty", c.VCLPath)
			}
		}},
		{name: "sidecar needs no ports", args: []string{"--mode=sidecar", "--secret-file=/s"}, check: func(t *testing.T, c *Config) {
			if c.DrainSocket != "/var/lib/varnishgw/drain.sock" {
				t.Errorf("sidecar DrainSocket = %q, want the default /var/lib/varnishgw/drain.sock", c.DrainSocket)
			}
		}},
		{name: "supervise has no drain socket by default", args: []string{"--listen=80"}, check: func(t *testing.T, c *Config) {
			if c.DrainSocket != "" {
				t.Errorf("supervise DrainSocket = %q, want none", c.DrainSocket)
			}
		}},
		{name: "drain socket from env", args: []string{"--mode=sidecar", "--secret-file=/s"}, env: []string{"VARNISHGW_DRAIN_SOCKET=/run/d.sock"}, check: func(t *testing.T, c *Config) {
			if c.DrainSocket != "/run/d.sock" {
				t.Errorf("DrainSocket = %q, want /run/d.sock", c.DrainSocket)
			}
		}},
		{name: "drain socket in supervise mode", args: []string{"--listen=80", "--drain-socket=/run/d.sock"}, check: func(t *testing.T, c *Config) {
			if c.DrainSocket != "/run/d.sock" {
				t.Errorf("DrainSocket = %q, want /run/d.sock", c.DrainSocket)
			}
		}},
		{name: "sidecar without drain socket", args: []string{"--mode=sidecar", "--secret-file=/s", "--drain-socket="}, wantErr: "--drain-socket is empty: sidecar mode needs the drain socket"},
		{name: "relative drain socket", args: []string{"--listen=80", "--drain-socket=drain.sock"}, wantErr: `--drain-socket="drain.sock": not an absolute path`},
		{name: "drain socket path too long", args: []string{"--listen=80", "--drain-socket=/" + strings.Repeat("d", 110)}, wantErr: "a Unix socket path has at most 107"},
		{name: "no port", wantErr: "--listen and --tls-listen are empty"},
		{name: "HTTPS ports", args: []string{"--listen=80", "--tls-listen=443,8443", "--routing=dir", "--routing-dir=/r", "--tls-dir=/run/tls"}, check: func(t *testing.T, c *Config) {
			ls := c.Listeners()
			if len(ls) != 3 || ls[1].Arg() != "port-443=/run/tls/port-443.sock,PROXY,mode=0600" || ls[2].Name != "port-8443" {
				t.Errorf("Listeners = %+v, want port-80 and the Unix sockets port-443 and port-8443", ls)
			}
			if !slices.Contains(c.VarnishParams(), "feature=+http2") {
				t.Errorf("VarnishParams = %v, want feature=+http2 (--http2 is on by default)", c.VarnishParams())
			}
		}},
		{name: "HTTPS ports only, HTTP/2 off", args: []string{"--tls-listen=443", "--routing=dir", "--routing-dir=/r", "--http2=false", "--param=a=1"}, check: func(t *testing.T, c *Config) {
			if want := append(varnishd.DefaultParams(), "a=1"); !slices.Equal(c.VarnishParams(), want) {
				t.Errorf("VarnishParams = %v, want %v: the defaults, --param, no feature=+http2", c.VarnishParams(), want)
			}
		}},
		{name: "--param replaces a default varnishd parameter", args: []string{"--listen=80", "--param=thread_pools=2", "--param=timeout_idle=10"}, check: func(t *testing.T, c *Config) {
			want := varnishd.WithDefaults([]string{"thread_pools=2", "timeout_idle=10"})
			if got := c.VarnishParams(); !slices.Equal(got, want) || slices.Contains(got, "thread_pools=1") || !slices.Contains(got, "thread_pools=2") {
				t.Errorf("VarnishParams = %v, want %v: the other defaults, then --param", got, want)
			}
		}},
		{name: "no HTTP/2 without HTTPS ports", args: []string{"--listen=80"}, check: func(t *testing.T, c *Config) {
			if slices.Contains(c.VarnishParams(), "feature=+http2") {
				t.Errorf("VarnishParams = %v: HTTP/2 without an HTTPS port", c.VarnishParams())
			}
		}},
		{name: "port both HTTP and HTTPS", args: []string{"--listen=443", "--tls-listen=443", "--routing=dir", "--routing-dir=/r"}, wantErr: "--tls-listen=443 is in --listen too"},
		{name: "HTTPS with file routing", args: []string{"--tls-listen=443"}, wantErr: "use --routing=kubernetes or --routing=dir"},
		{name: "relative TLS dir", args: []string{"--tls-listen=443", "--routing=dir", "--routing-dir=/r", "--tls-dir=tls"}, wantErr: `--tls-dir="tls": want an absolute directory`},
		{name: "TLS dir too long", args: []string{"--tls-listen=443", "--routing=dir", "--routing-dir=/r", "--tls-dir=/" + strings.Repeat("t", 100)}, wantErr: "too long for Unix socket paths"},
		{name: "no hitch", args: []string{"--tls-listen=443", "--routing=dir", "--routing-dir=/r", "--hitch="}, wantErr: "--hitch is empty"},
		{name: "bad port", args: []string{"--listen=80,http"}, wantErr: `"http" is not a port number`},
		{name: "port out of range", args: []string{"--listen=70000"}, wantErr: "not a port number"},
		{name: "bad mode", args: []string{"--mode=operator", "--listen=80"}, wantErr: `--mode="operator": want supervise or sidecar`},
		{name: "sidecar without secret", args: []string{"--mode=sidecar"}, wantErr: "--secret-file is empty"},
		{name: "admin not loopback", args: []string{"--listen=80", "--admin-addr=0.0.0.0:6082"}, wantErr: "--admin-addr=\"0.0.0.0:6082\": \"0.0.0.0\" is not a loopback address"},
		{name: "ghost admin not loopback", args: []string{"--listen=80", "--ghost-admin-addr=10.0.0.1:6084"}, wantErr: "--ghost-admin-addr"},
		{name: "relative workdir", args: []string{"--listen=80", "--workdir=w"}, wantErr: "--workdir=\"w\": want an absolute directory"},
		{name: "bad param", args: []string{"--listen=80", "--param=timeout_idle"}, wantErr: "--param=\"timeout_idle\": want NAME=VALUE"},
		{name: "bad duration from env", env: []string{"VARNISHGW_DRAIN_TIMEOUT=soon"}, wantErr: "VARNISHGW_DRAIN_TIMEOUT=\"soon\""},
		{name: "bad log level", args: []string{"--listen=80", "--log-level=loud"}, wantErr: "--log-level"},
		{name: "keep zero VCLs", args: []string{"--listen=80", "--vcl-keep=0"}, wantErr: "--vcl-keep=0"},
		{name: "positional argument", args: []string{"--listen=80", "extra"}, wantErr: `unexpected argument "extra"`},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "flag provided but not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig(tc.args, tc.env, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}
