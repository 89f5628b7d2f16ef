package gwruntime

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
)

func TestStartHash(t *testing.T) {
	base := testSpec().StartHash()
	for _, tc := range []struct {
		name   string
		change func(*Spec)
		rolls  bool
	}{
		{"gateway VCL", func(s *Spec) { v := "other"; s.GatewayVCL = &v }, false},
		{"class VCL", func(s *Spec) { s.Class.VCL = "other" }, false},
		{"replicas", func(s *Spec) { s.Replicas = 5 }, false},
		{"parameter order", func(s *Spec) { s.Class.Params = map[string]string{"a": "1", "b": "2"} }, false},
		{"storage", func(s *Spec) { s.Class.Storage = "malloc,2g" }, true},
		{"image", func(s *Spec) { s.Class.Image = "img:2" }, true},
		{"a port", func(s *Spec) { s.Ports = []int32{80} }, true},
		{"a parameter", func(s *Spec) { s.Class.Params["a"] = "3" }, true},
		{"mode", func(s *Spec) { s.Mode = ModeSidecar }, true},
		{"drain timeout", func(s *Spec) { s.DrainTimeout = 61 }, true},
		{"access log", func(s *Spec) { s.Class.AccessLog = true }, true},
		{"proxy protocol", func(s *Spec) { s.ProxyProtocol = true }, true},
		{"proxy protocol in sidecar mode", func(s *Spec) { s.Mode, s.ProxyProtocol = ModeSidecar, true }, true},
		{"empty sysctls", func(s *Spec) { s.Sysctls = map[string]string{} }, false},
		{"a sysctl", func(s *Spec) { s.Sysctls = map[string]string{"net.ipv4.tcp_migrate_req": "1"} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec()
			tc.change(s)
			if rolled := s.StartHash() != base; rolled != tc.rolls {
				t.Errorf("changing %s changes the start hash: %v, want %v", tc.name, rolled, tc.rolls)
			}
		})
	}
}

// The sidecar's preStop hook reaches the chaperone's drain socket on the
// state volume both containers mount, where the chaperone creates it by
// default in sidecar mode.
func TestSidecarDrainSocketOnTheSharedVolume(t *testing.T) {
	if filepath.Dir(DrainSocket) != stateDir {
		t.Errorf("drain socket %s is not on the state volume %s", DrainSocket, stateDir)
	}
	s := testSpec()
	s.Mode = ModeSidecar
	d := s.Deployment()
	for _, c := range d.Spec.Template.Spec.Containers {
		mounted := false
		for _, m := range c.VolumeMounts {
			mounted = mounted || (*m.Name == stateVolume && *m.MountPath == stateDir)
		}
		if !mounted {
			t.Errorf("container %s does not mount the state volume at %s", *c.Name, stateDir)
		}
	}
	for _, a := range s.ChaperoneArgs() {
		if strings.HasPrefix(a, "--drain-socket") {
			t.Errorf("chaperone arg %q: the hook assumes the default drain socket", a)
		}
	}
}

func TestGatewayRulesCertificates(t *testing.T) {
	s := httpsSpec(ModeSupervise)
	rules := s.GatewayRules()
	base := GatewayRules(s.Gateway)
	if len(rules) != len(base)+1 {
		t.Fatalf("rules = %+v, want the gateway's rules and one for the Secrets", rules)
	}
	last := rules[len(rules)-1]
	if !slices.Equal(last.Resources, []string{"secrets"}) || !slices.Equal(last.ResourceNames, []string{"api", "www"}) {
		t.Errorf("Secrets rule = %+v, want exactly api and www of the gateway's namespace", last)
	}
	if got := testSpec().GatewayRules(); len(got) != len(base) {
		t.Errorf("an HTTP gateway's Role has other rules than before: %+v", got)
	}
	if n := s.CertificateSecretNames(); !slices.Equal(n["certs"], []string{"shared"}) {
		t.Errorf("certSecretNames = %v", n)
	}
}

func TestChaperoneArgs(t *testing.T) {
	s := testSpec()
	want := []string{"--routing=kubernetes", "--gateway=edge/public", "--vcl=", "--workdir=/var/lib/varnishgw/varnishd", "--ghost-json=/var/lib/varnishgw/varnishd/ghost.json",
		"--listen=80,8080", "--storage=malloc,1g", "--param=a=1", "--param=b=2", "--log-level=info", "--drain-timeout=60s", "--health-addr=:9091"}
	if got := s.ChaperoneArgs(); !slices.Equal(got, want) {
		t.Errorf("supervise args = %q\nwant %q", got, want)
	}
	// The class's default storage and no parameters: still written.
	s.Class.Storage, s.Class.Params = "malloc,256m", nil
	want = []string{"--routing=kubernetes", "--gateway=edge/public", "--vcl=", "--workdir=/var/lib/varnishgw/varnishd", "--ghost-json=/var/lib/varnishgw/varnishd/ghost.json",
		"--listen=80,8080", "--storage=malloc,256m", "--log-level=info", "--drain-timeout=300s", "--health-addr=:9091"}
	s.DrainTimeout = 300
	if got := s.ChaperoneArgs(); !slices.Equal(got, want) {
		t.Errorf("supervise args with the defaults = %q\nwant %q", got, want)
	}
	s = testSpec()
	s.Mode = ModeSidecar
	want = []string{"--routing=kubernetes", "--gateway=edge/public", "--vcl=", "--workdir=/var/lib/varnishgw/varnishd", "--ghost-json=/var/lib/varnishgw/varnishd/ghost.json",
		"--mode=sidecar", "--secret-file=/etc/varnishgw/secret/secret",
		"--log-level=info", "--drain-timeout=60s", "--health-addr=:9091"}
	if got := s.ChaperoneArgs(); !slices.Equal(got, want) {
		t.Errorf("sidecar args = %q\nwant %q", got, want)
	}
	s.Class.AccessLog = true
	want = slices.Insert(want, len(want)-3, "--access-log")
	if got := s.ChaperoneArgs(); !slices.Equal(got, want) {
		t.Errorf("sidecar args with access_log = %q\nwant %q", got, want)
	}
	s.Class.AccessLog = false
	s.Class.ExternalNames = true
	want = append(slices.Delete(want, len(want)-4, len(want)-3), "--external-name-services")
	if got := s.ChaperoneArgs(); !slices.Equal(got, want) {
		t.Errorf("sidecar args with external_name_services = %q\nwant %q", got, want)
	}
	s.Class.ExternalNames = false
}

// testSpec is a supervise-mode gateway with two HTTP ports; its
// SidecarVarnishd stands in for the provider's (package varnishd).
func testSpec() *Spec {
	vcl := "sub vcl_deliver { }"
	return &Spec{
		Gateway:      object.Ref{Namespace: "edge", Name: "public"},
		Class:        &Class{Image: "img:1", PullPolicy: "IfNotPresent", Storage: "malloc,1g", LogLevel: "info", Params: map[string]string{"b": "2", "a": "1"}, VCL: "sub vcl_recv { }"},
		GatewayVCL:   &vcl,
		Ports:        []int32{80, 8080},
		Replicas:     2,
		Mode:         ModeSupervise,
		DrainTimeout: 60,
		SidecarVarnishd: func(s *Spec) []string {
			return []string{fmt.Sprint(s.Ports, s.TLSPorts, s.ProxyProtocol, s.NoHTTP2, s.Class.Params)}
		},
	}
}

// httpsSpec is testSpec with an HTTPS listener on 8443 whose certificates
// are two Secrets of the gateway's namespace and one of namespace certs.
func httpsSpec(mode string) *Spec {
	s := testSpec()
	s.Mode = mode
	s.Ports = []int32{80, 8080, 8443}
	s.TLSPorts = []int32{8443}
	s.CertSecrets = []object.Ref{{Namespace: "certs", Name: "shared"}, {Namespace: "edge", Name: "api"}, {Namespace: "edge", Name: "www"}}
	return s
}
