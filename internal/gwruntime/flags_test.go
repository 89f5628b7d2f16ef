package gwruntime

import (
	"flag"
	"io"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestChaperoneFlagsArgs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*ChaperoneFlags)
		always []string
		want   []string
	}{
		{"defaults", func(*ChaperoneFlags) {}, nil, nil},
		{"defaults written on demand", func(*ChaperoneFlags) {}, []string{"health-addr", "drain-timeout"},
			[]string{"--drain-timeout=300s", "--health-addr=:9091"}},
		{"emptied string", func(f *ChaperoneFlags) { f.VCLPath = "" }, nil, []string{"--vcl="}},
		{"ports", func(f *ChaperoneFlags) { f.Ports = []int{80, 8080} }, nil, []string{"--listen=80,8080"}},
		{"list once per value", func(f *ChaperoneFlags) { f.Params = []string{"a=1", "b=2"} }, nil,
			[]string{"--param=a=1", "--param=b=2"}},
		{"emptied list", func(f *ChaperoneFlags) { f.StatsExclude = nil }, nil, []string{"--stats-exclude="}},
		{"true bool", func(f *ChaperoneFlags) { f.AccessLog = true }, nil, []string{"--access-log"}},
		{"duration in seconds", func(f *ChaperoneFlags) { f.DrainTimeout = 90 * time.Second }, nil, []string{"--drain-timeout=90s"}},
		{"duration below a second", func(f *ChaperoneFlags) { f.StatsInterval = 1500 * time.Millisecond }, nil, []string{"--stats-interval=1.5s"}},
		{"register order", func(f *ChaperoneFlags) {
			f.LogLevel, f.Mode, f.RoutingSource, f.Gateway = "debug", ModeSidecar, RoutingKubernetes, "edge/public"
		}, nil, []string{"--routing=kubernetes", "--gateway=edge/public", "--mode=sidecar", "--log-level=debug"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := DefaultChaperoneFlags()
			tc.change(&f)
			got := f.Args(tc.always...)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Args = %q, want %q", got, tc.want)
			}
			back, err := ParseChaperoneArgs(got)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, f) {
				t.Errorf("ParseChaperoneArgs(Args) = %+v\nwant %+v", back, f)
			}
		})
	}
}

func TestListFlagRenew(t *testing.T) {
	f := DefaultChaperoneFlags()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	f.Register(fs)
	for _, v := range []string{"malloc,1g", "file,/x,1g"} {
		if err := fs.Set("storage", v); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"malloc,1g", "file,/x,1g"}; !slices.Equal(f.Storage, want) {
		t.Fatalf("after two values: %q, want %q (the first replaces the default)", f.Storage, want)
	}
	fs.Lookup("storage").Value.(ListFlag).Renew()
	if err := fs.Parse([]string{"--storage=malloc,2g"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"malloc,2g"}; !slices.Equal(f.Storage, want) {
		t.Errorf("after Renew: %q, want %q", f.Storage, want)
	}
}

func TestParseChaperoneArgsErrors(t *testing.T) {
	for _, args := range [][]string{{"--no-such-flag"}, {"--listen=http"}, {"--listen=70000"}, {"--drain-timeout=soon"}} {
		if _, err := ParseChaperoneArgs(args); err == nil {
			t.Errorf("ParseChaperoneArgs(%q) = nil error", args)
		}
	}
}

// TestDefaultsArePinned: the provider leaves out the flags at their
// default, so a default is part of the contract between a provider and the
// chaperone images of other releases it runs (docs/security.md, version
// skew). Changing one is a breaking change: say so in CHANGELOG.md and
// update this test.
func TestDefaultsArePinned(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := DefaultChaperoneFlags()
	f.Register(fs)
	got := map[string]string{}
	fs.VisitAll(func(fl *flag.Flag) { got[fl.Name] = fl.DefValue })
	want := map[string]string{
		"routing": "file", "gateway": "", "kubeconfig": "", "routing-dir": "", "pod-name": "", "pod-uid": "",
		"vcl": "/etc/varnishgw/main.vcl", "vcl-keep": "3", "workdir": "/var/lib/varnishgw/varnishd",
		"ghost-json": "/var/lib/varnishgw/ghost.json", "mode": "supervise", "secret-file": "",
		"listen": "", "tls-listen": "", "tls-dir": "/run/varnishgw/tls", "hitch": "/usr/sbin/hitch", "proxy-protocol": "false", "http2": "true", "listen-host": "", "storage": "malloc,256m", "param": "", "thread-pool-stack": "",
		"varnishd": "/usr/sbin/varnishd", "admin-addr": "127.0.0.1:6082", "ghost-admin-addr": "127.0.0.1:6084",
		"drain-socket": "", "varnishstat": "varnishstat", "stats-interval": "2s", "stats-exclude": "VBE.*",
		"access-log": "false", "varnishncsa": "varnishncsa", "log-level": "info", "drain-timeout": "5m0s",
		"health-addr": ":9091", "invalidate-addr": "", "invalidate-timeout": "30s",
		"external-name-services": "false", "dns-server": "",
		"external-name-refuse": "0.0.0.0/8 127.0.0.0/8 169.254.0.0/16 224.0.0.0/4 255.255.255.255/32 100.100.100.200/32 168.63.129.16/32 ::/128 ::1/128 fe80::/10 ff00::/8 fd00:ec2::254/128 64:ff9b::/96 self",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults = %v\nwant %v", got, want)
	}
}
