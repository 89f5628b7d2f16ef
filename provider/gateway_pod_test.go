package provider

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

func TestDecodeAffinity(t *testing.T) {
	for _, tc := range []struct{ in, wantErr string }{
		{`{"podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":100,"podAffinityTerm":{"topologyKey":"kubernetes.io/hostname","labelSelector":{"matchLabels":{"a":"b"}}}}]}}`, ""},
		{`{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpression":[]}]}}}`,
			`unknown field "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpression"`},
		{`{"NodeAffinity":{}}`, `unknown field "NodeAffinity"`},
		{`{"podAffinity":{},"podAffinity":{}}`, `duplicate field "podAffinity"`},
		{`{"podAffinity":[]}`, `not the JSON of a Kubernetes affinity`},
		{`nope`, `not the JSON of a Kubernetes affinity`},
	} {
		_, err := decodeAffinity(tc.in)
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("decodeAffinity(%s) = %v, want %q", tc.in, err, tc.wantErr)
		}
	}
}

// TestReadPod reads back what withPodSettings wrote: the same model, the
// configured spelling of affinity, and on import everything but the
// provider's and the infrastructure's labels and annotations.
func TestReadPod(t *testing.T) {
	s := fullPodSpec()
	aff := `{ "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": [ { "matchExpressions": [ { "key": "kubernetes.io/arch", "operator": "In", "values": [ "amd64" ] } ] } ] } } }`
	configured := &podModel{
		ImagePullSecrets: stringListValue([]string{"registry"}),
		NodeSelector:     stringMapValue(map[string]string{"pool": "edge"}),
		Tolerations: []tolerationModel{
			{Key: types.StringValue("dedicated"), Operator: types.StringValue("Equal"), Value: types.StringValue("edge"), Effect: types.StringValue("NoSchedule"), TolerationSeconds: types.Int64Null()},
			{Key: types.StringNull(), Operator: types.StringValue("Exists"), Value: types.StringNull(), Effect: types.StringValue("NoExecute"), TolerationSeconds: types.Int64Value(30)},
		},
		Affinity: types.StringValue(aff),
		TopologySpread: []topologySpreadModel{{MaxSkew: types.Int64Value(1), TopologyKey: types.StringValue("topology.kubernetes.io/zone"),
			WhenUnsatisfiable: types.StringValue("DoNotSchedule"), MinDomains: types.Int64Value(2), NodeAffinityPolicy: types.StringNull(), NodeTaintsPolicy: types.StringNull()}},
		PriorityClassName: types.StringValue("edge-critical"),
		Labels:            stringMapValue(map[string]string{"team": "platform"}),
		Annotations:       stringMapValue(map[string]string{"prometheus.io/scrape": "true"}),
	}
	got, err := configured.settings()
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, s.Pod) {
		t.Fatalf("settings() = %+v\nwant %+v", got, s.Pod)
	}
	tpl := typedDeployment(t, s).Spec.Template
	// Another manager's annotation, as kubectl rollout restart writes it.
	tpl.Annotations["kubectl.kubernetes.io/restartedAt"] = "2026-01-01T00:00:00Z"

	read := readPod(configured, tpl, s.Infra, false)
	if !reflect.DeepEqual(read, configured) {
		t.Errorf("read back:\n%+v\nwant the configuration:\n%+v", read, configured)
	}
	imported := readPod(nil, tpl, s.Infra, true)
	if want := normalJSON(s.Pod.Affinity); imported.Affinity.ValueString() != want || !strings.HasPrefix(want, `{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution"`) {
		t.Errorf("imported affinity = %s, want the jsonencode form %s", imported.Affinity.ValueString(), want)
	}
	if l := stringMap(imported.Labels); !maps.Equal(l, map[string]string{"team": "platform"}) {
		t.Errorf("imported labels = %v, want pod.labels only (not the selector's, the Gateway API's or the infrastructure's)", l)
	}
	if a := stringMap(imported.Annotations); !maps.Equal(a, map[string]string{"prometheus.io/scrape": "true", "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}) {
		t.Errorf("imported annotations = %v", a)
	}
	if readPod(nil, typedDeployment(t, testSpec()).Spec.Template, gwruntime.InfraSettings{}, true) != nil {
		t.Error("a pod without settings reads as a pod attribute")
	}
	if readPod(&podModel{}, typedDeployment(t, testSpec()).Spec.Template, gwruntime.InfraSettings{}, false) == nil {
		t.Error("pod = {} read back as null")
	}
}

func TestImageTagWarning(t *testing.T) {
	for _, tc := range []struct{ image, policy, want string }{
		{"localhost/varnishgw/gateway:1.2.0", "IfNotPresent", ""},
		{"registry.example.com/gw@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "IfNotPresent", ""},
		{"registry.example.com/gw:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "Always", ""},
		{"localhost/varnishgw/gateway", "IfNotPresent", `has no tag, so the kubelet pulls localhost/varnishgw/gateway:latest. With image_pull_policy = "IfNotPresent" a node that already has an image of that name keeps using it`},
		{"gateway", "Never", `so the kubelet pulls docker.io/library/gateway:latest`},
		{"localhost/varnishgw/gateway:latest", "Always", `uses the tag latest. With image_pull_policy = "Always" each new pod pulls whatever latest names`},
	} {
		got := imageTagWarning(tc.image, tc.policy)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("imageTagWarning(%s, %s) = %q, want %q", tc.image, tc.policy, got, tc.want)
		}
		if got != "" && !strings.Contains(got, "Give every build its own tag") {
			t.Errorf("warning %q does not say what to do", got)
		}
	}
}

func TestReservedKey(t *testing.T) {
	for key, want := range map[string]string{
		"team":                                   "",
		"example.com/owner":                      "",
		"app.kubernetes.io/instance":             "selects its pods by",
		"pod-template-hash":                      "selects its pods by",
		"varnishgw.dev/start-hash":               "uses the prefix varnishgw.dev/",
		"gateway.networking.k8s.io/gateway-name": "GEP-1762",
	} {
		resp := &validator.StringResponse{}
		reservedKey{}.ValidateString(context.Background(), validator.StringRequest{Path: path.Root("labels"), ConfigValue: types.StringValue(key)}, resp)
		var got string
		for _, d := range resp.Diagnostics.Errors() {
			got += d.Detail()
		}
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("key %s: %q, want %q", key, got, want)
		}
	}
}

// TestSysctlsValidators: the sysctls attribute's names and values are
// checked at plan, and each error names the key and the fix.
func TestSysctlsValidators(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		wantErr    string // a part of the error detail, "" for none
	}{
		{"net.ipv4.tcp_migrate_req", "1", ""},
		{"net/ipv4/tcp_migrate_req", "1", ""},
		{"kernel.shm_rmid_forced", "0", ""},
		{"net.ipv4.ip_local_port_range", "1024 65535", ""},
		{"net.ipv4.ip_unprivileged_port_start", "0", "from the gateway's lowest listener port"},
		{"net/ipv4/ip_unprivileged_port_start", "0", "Remove it from sysctls"},
		{"Net.IPv4.tcp_migrate_req", "1", "must be a sysctl name"},
		{"net..ipv4", "1", "must be a sysctl name"},
		{"net.ipv4.", "1", "must be a sysctl name"},
		{"net.ipv4.tcp_migrate_req_", "1", "must be a sysctl name"},
		{"net ipv4", "1", "must be a sysctl name"},
		{"n." + strings.Repeat("a", 252), "1", "at most 253"},
		{"net.ipv4.tcp_migrate_req", "", `for example "1", not empty`},
		{"net.ipv4.tcp_migrate_req", " ", `for example "1", not empty`},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			p := path.Root("sysctls")
			req := validator.MapRequest{Path: p, PathExpression: p.Expression(),
				ConfigValue: stringMapValue(map[string]string{tc.key: tc.value})}
			var details []string
			for _, v := range sysctlsValidators() {
				resp := &validator.MapResponse{}
				v.ValidateMap(context.Background(), req, resp)
				for _, d := range resp.Diagnostics.Errors() {
					details = append(details, d.Detail())
				}
			}
			all := strings.Join(details, "\n")
			switch {
			case tc.wantErr == "" && len(details) > 0:
				t.Errorf("errors for a valid sysctl: %s", all)
			case tc.wantErr != "" && !strings.Contains(all, tc.wantErr):
				t.Errorf("errors %q, want one with %q", all, tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(all, fmt.Sprintf("sysctls[%q]", tc.key)) && !strings.Contains(all, fmt.Sprintf("%q", tc.key)):
				t.Errorf("errors %q do not name the key %q", all, tc.key)
			}
		})
	}
}

// TestSysctlsNamedOnce: one sysctl named with dots and with slashes is an
// error naming both keys; dots inside a slash-separated name's segments are
// another sysctl.
func TestSysctlsNamedOnce(t *testing.T) {
	for _, tc := range []struct {
		keys    []string
		wantErr string
	}{
		{[]string{"net.ipv4.tcp_migrate_req", "net/ipv4/tcp_migrate_req"}, `sysctls["net.ipv4.tcp_migrate_req"] and sysctls["net/ipv4/tcp_migrate_req"] name the same sysctl`},
		{[]string{"net/ipv4/conf/eth0.100/forwarding", "net.ipv4.conf.eth0/100.forwarding"}, "name the same sysctl, net.ipv4.conf.eth0/100.forwarding"},
		{[]string{"net/ipv4/conf/eth0.100/forwarding", "net.ipv4.conf.eth0.100.forwarding"}, ""},
		{[]string{"net.ipv4.tcp_migrate_req", "kernel.shm_rmid_forced"}, ""},
	} {
		t.Run(strings.Join(tc.keys, ","), func(t *testing.T) {
			m := map[string]string{}
			for _, k := range tc.keys {
				m[k] = "1"
			}
			p := path.Root("sysctls")
			resp := &validator.MapResponse{}
			distinctSysctls{}.ValidateMap(context.Background(), validator.MapRequest{Path: p, PathExpression: p.Expression(), ConfigValue: stringMapValue(m)}, resp)
			var all []string
			for _, d := range resp.Diagnostics.Errors() {
				all = append(all, d.Detail())
			}
			got := strings.Join(all, "\n")
			if (tc.wantErr == "") != (got == "") || !strings.Contains(got, tc.wantErr) {
				t.Errorf("errors %q, want one with %q", got, tc.wantErr)
			}
		})
	}
}

// TestReadSysctls: the sysctls attribute reads back every sysctl of the
// pods but the provider's own; unset stays unset without another.
func TestReadSysctls(t *testing.T) {
	own := corev1.Sysctl{Name: gwruntime.UnprivilegedPortSysctl, Value: "80"}
	migrate := corev1.Sysctl{Name: "net.ipv4.tcp_migrate_req", Value: "1"}
	for _, tc := range []struct {
		name  string
		prior types.Map
		pod   []corev1.Sysctl
		want  types.Map
	}{
		{"unset, the provider's only", types.MapNull(types.StringType), []corev1.Sysctl{own}, types.MapNull(types.StringType)},
		{"unset, none", types.MapNull(types.StringType), nil, types.MapNull(types.StringType)},
		{"empty stays empty", stringMapValue(map[string]string{}), []corev1.Sysctl{own}, stringMapValue(map[string]string{})},
		{"set", stringMapValue(map[string]string{"net.ipv4.tcp_migrate_req": "1"}), []corev1.Sysctl{own, migrate},
			stringMapValue(map[string]string{"net.ipv4.tcp_migrate_req": "1"})},
		{"imported", types.MapNull(types.StringType), []corev1.Sysctl{own, migrate}, stringMapValue(map[string]string{"net.ipv4.tcp_migrate_req": "1"})},
		{"removed out of band", stringMapValue(map[string]string{"net.ipv4.tcp_migrate_req": "1"}), []corev1.Sysctl{own}, stringMapValue(map[string]string{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readSysctls(tc.prior, &corev1.PodSecurityContext{Sysctls: tc.pod})
			if !got.Equal(tc.want) {
				t.Errorf("readSysctls = %s, want %s", got, tc.want)
			}
		})
	}
	if got := readSysctls(types.MapNull(types.StringType), nil); !got.IsNull() {
		t.Errorf("readSysctls without a security context = %s, want null", got)
	}
}
