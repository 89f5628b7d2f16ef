package provider

import (
	"context"
	"slices"
	"strings"
	"testing"

	fwresource "github.com/hashicorp/terraform-plugin-framework/resource"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

func TestSidecarVarnishdArgs(t *testing.T) {
	s := testSpec()
	s.Mode = gwruntime.ModeSidecar
	wantVarnishd := []string{"-F", "-n", "/var/lib/varnishgw/varnishd", "-a", "port-80=:80", "-a", "port-8080=:8080",
		"-a", "ghost-admin=127.0.0.1:6084", "-M", "127.0.0.1:6082", "-T", "none", "-S", "/etc/varnishgw/secret/secret",
		"-f", "/etc/varnishgw/boot/boot.vcl", "-s", "malloc,1g"}
	for _, p := range varnishd.DefaultParams() {
		wantVarnishd = append(wantVarnishd, "-p", p)
	}
	wantVarnishd = append(wantVarnishd, "-p", "a=1", "-p", "b=2")
	if got := varnishdArgs(s); !slices.Equal(got, wantVarnishd) {
		t.Errorf("varnishd args = %q\nwant %q", got, wantVarnishd)
	}
	// A class parameter replaces the default of the same name.
	s.Class.Params = map[string]string{"thread_pools": "2"}
	va := strings.Join(varnishdArgs(s), " ")
	if !strings.Contains(va, "-p thread_pools=2") || strings.Contains(va, "thread_pools=1") || !strings.Contains(va, "-p vsl_mask=") {
		t.Errorf("varnishd args with varnishd_params thread_pools=2 = %q, want thread_pools=2 instead of the default and the other defaults kept", va)
	}
}

// TestGatewayAttributePath: routing.ValidateGateway's field paths map to
// the listener blocks' arguments.
func TestGatewayAttributePath(t *testing.T) {
	ctx := context.Background()
	var s fwresource.SchemaResponse
	(&gatewayResource{}).Schema(ctx, fwresource.SchemaRequest{}, &s)
	for field, want := range map[string]string{
		"spec.listeners[2].hostname":                                           "listener[2].hostname",
		"spec.listeners[0].name":                                               "listener[0].name",
		"spec.listeners[1].allowedRoutes.namespaces.selector":                  "listener[1].allowed_routes.selector",
		"spec.listeners[1].allowedRoutes.namespaces.selector.matchExpressions": "listener[1].allowed_routes.selector_expression",
		"spec.listeners[1].allowedRoutes.namespaces.from":                      "listener[1].allowed_routes.namespaces",
		"spec.listeners[0].allowedRoutes.kinds[1]":                             "listener[0].allowed_routes.kind[1]",
		"spec.listeners":                         "listener",
		"spec.infrastructure.parametersRef.name": "infrastructure.parameters_ref.name",
	} {
		p, text := attributePath(ctx, s.Schema, field)
		if text != want || p.String() != want {
			t.Errorf("attributePath(%q) = %s (%s), want %s", field, text, p, want)
		}
	}
}

func TestReadResourcesKeepsSpelling(t *testing.T) {
	prior := &resourcesModel{Requests: stringMapValue(map[string]string{"cpu": "0.5"}), Limits: stringMapValue(map[string]string{"memory": "1Gi"})}
	rr := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
	}
	got := readResources(prior, rr)
	if v := stringMap(got.Requests)["cpu"]; v != "0.5" {
		t.Errorf("cpu request = %q, want the configured spelling 0.5 of the same quantity", v)
	}
	if v := stringMap(got.Limits)["memory"]; v != "2Gi" {
		t.Errorf("memory limit = %q, want the changed value 2Gi", v)
	}
	if readResources(prior, corev1.ResourceRequirements{}) != nil {
		t.Error("no resources in the cluster should read as null")
	}
}

func TestParseResources(t *testing.T) {
	_, err := parseResources("resources.limits", map[string]string{"memory": "lots"})
	if err == nil || !strings.Contains(err.Error(), `resources.limits["memory"] = "lots" is not a Kubernetes quantity`) ||
		!strings.Contains(err.Error(), `use for example "500m" for CPU or "256Mi" for memory`) {
		t.Errorf("parseResources error = %v, want the field, the value and the fix", err)
	}
	got, err := parseResources("resources.requests", map[string]string{"cpu": "250m"})
	if err != nil || got.Cpu().MilliValue() != 250 {
		t.Errorf("parseResources = %v, %v", got, err)
	}
}

func TestHTTPSRuntime(t *testing.T) {
	s := httpsSpec(gwruntime.ModeSupervise)
	args := s.ChaperoneArgs()
	for _, want := range []string{"--listen=80,8080", "--tls-listen=8443"} {
		if !slices.Contains(args, want) {
			t.Errorf("supervise args %q lack %s", args, want)
		}
	}
	for _, a := range args {
		if strings.HasPrefix(a, "--http2") || strings.HasPrefix(a, "--tls-dir") {
			t.Errorf("supervise args %q: %s is the chaperone's default, not written", args, a)
		}
	}
	s.NoHTTP2 = true
	if args := s.ChaperoneArgs(); !slices.Contains(args, "--http2=false") {
		t.Errorf("http2 off: args %q lack --http2=false", args)
	}
	if h := s.StartHash(); h == httpsSpec(gwruntime.ModeSupervise).StartHash() {
		t.Error("switching HTTP/2 off does not roll the pods")
	}

	// The TLS volume: memory-backed, bounded, at the chaperone's default
	// --tls-dir, in the chaperone container (hitch) and, in sidecar mode,
	// in the varnish container too (varnishd opens the sockets).
	for _, mode := range []string{gwruntime.ModeSupervise, gwruntime.ModeSidecar} {
		d := httpsSpec(mode).Deployment()
		var vol *corev1.EmptyDirVolumeSource
		for _, v := range d.Spec.Template.Spec.Volumes {
			if *v.Name == gwruntime.TLSVolume && v.EmptyDir != nil {
				vol = &corev1.EmptyDirVolumeSource{Medium: *v.EmptyDir.Medium, SizeLimit: v.EmptyDir.SizeLimit}
			}
		}
		if vol == nil || vol.Medium != corev1.StorageMediumMemory || vol.SizeLimit == nil || vol.SizeLimit.Cmp(resource.MustParse("16Mi")) != 0 {
			t.Fatalf("%s: TLS volume %+v, want an emptyDir of medium Memory and sizeLimit 16Mi", mode, vol)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			mounted := false
			for _, m := range c.VolumeMounts {
				mounted = mounted || (*m.Name == gwruntime.TLSVolume && *m.MountPath == "/run/varnishgw/tls")
			}
			if !mounted {
				t.Errorf("%s: container %s does not mount the TLS volume at /run/varnishgw/tls", mode, *c.Name)
			}
			var ports []int32
			for _, p := range c.Ports {
				ports = append(ports, *p.ContainerPort)
			}
			switch {
			case *c.Name == gwruntime.ChaperoneContainer && mode == gwruntime.ModeSupervise && !slices.Equal(ports, []int32{80, 8080, 8443, gwruntime.HealthPort}),
				*c.Name == gwruntime.ChaperoneContainer && mode == gwruntime.ModeSidecar && !slices.Equal(ports, []int32{8443, gwruntime.HealthPort}),
				*c.Name == gwruntime.VarnishContainer && !slices.Equal(ports, []int32{80, 8080}):
				t.Errorf("%s: container %s has ports %v", mode, *c.Name, ports)
			}
		}
	}
	// An HTTP gateway has no TLS volume: its pod template is unchanged.
	for _, v := range testSpec().Deployment().Spec.Template.Spec.Volumes {
		if *v.Name == gwruntime.TLSVolume {
			t.Error("an HTTP gateway has the TLS volume")
		}
	}

	// Sidecar: varnishd gets the Unix socket hitch hands HTTPS connections
	// to (PROXY), and HTTP/2.
	s = httpsSpec(gwruntime.ModeSidecar)
	va := strings.Join(varnishdArgs(s), " ")
	for _, want := range []string{"-a port-80=:80 -a port-8080=:8080 -a port-8443=/run/varnishgw/tls/port-8443.sock,PROXY,mode=0600", "-p b=2 -p feature=+http2"} {
		if !strings.Contains(va, want) {
			t.Errorf("sidecar varnishd args %q lack %q", va, want)
		}
	}
	if args := s.ChaperoneArgs(); !slices.Contains(args, "--tls-listen=8443") || slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--listen") }) {
		t.Errorf("sidecar chaperone args %q: want --tls-listen=8443 (hitch) and no --listen", args)
	}
	s.NoHTTP2 = true
	if va := strings.Join(varnishdArgs(s), " "); strings.Contains(va, "http2") {
		t.Errorf("HTTP/2 off: varnishd args %q", va)
	}
	if va := strings.Join(varnishdArgs(testSpec()), " "); strings.Contains(va, "http2") {
		t.Errorf("HTTP gateway: varnishd args %q turn HTTP/2 on", va)
	}
}

// TestProxyProtocolRuntime: proxy_protocol gives the chaperone
// --proxy-protocol (it makes varnishd's HTTP sockets take the PROXY
// protocol in supervise mode and hitch pass it on in both modes) and, in
// sidecar mode, the HTTP sockets of the varnish container's varnishd
// PROXY; off, neither appears, so existing gateways' pods do not change.
func TestProxyProtocolRuntime(t *testing.T) {
	for _, tc := range []struct {
		name        string
		spec        *gwruntime.Spec
		proxy       bool
		wantFlag    bool
		wantSockets string // the varnish container's -a arguments, sidecar only
	}{
		{"supervise, off", testSpec(), false, false, ""},
		{"supervise, on", testSpec(), true, true, ""},
		{"supervise HTTPS, on", httpsSpec(gwruntime.ModeSupervise), true, true, ""},
		{"sidecar, off", httpsSpec(gwruntime.ModeSidecar), false, false,
			"-a port-80=:80 -a port-8080=:8080 -a port-8443=/run/varnishgw/tls/port-8443.sock,PROXY,mode=0600 -a ghost-admin=127.0.0.1:6084"},
		{"sidecar, on", httpsSpec(gwruntime.ModeSidecar), true, true,
			"-a port-80=:80,PROXY -a port-8080=:8080,PROXY -a port-8443=/run/varnishgw/tls/port-8443.sock,PROXY,mode=0600 -a ghost-admin=127.0.0.1:6084"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.spec
			s.ProxyProtocol = tc.proxy
			args := s.ChaperoneArgs()
			if got := slices.Contains(args, "--proxy-protocol"); got != tc.wantFlag {
				t.Errorf("chaperone args %q: --proxy-protocol %v, want %v", args, got, tc.wantFlag)
			}
			if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--proxy-protocol=") }) {
				t.Errorf("chaperone args %q: --proxy-protocol with a value", args)
			}
			f, err := gwruntime.ParseChaperoneArgs(args)
			if err != nil || f.ProxyProtocol != tc.proxy {
				t.Errorf("chaperone args %q parse to ProxyProtocol %v (%v), want %v", args, f.ProxyProtocol, err, tc.proxy)
			}
			if tc.wantSockets != "" {
				if va := strings.Join(varnishdArgs(s), " "); !strings.Contains(va, tc.wantSockets) {
					t.Errorf("varnishd args %q lack %q", va, tc.wantSockets)
				}
			}
		})
	}
	// Off, the arguments are unchanged: TestChaperoneArgs pins them.
}
