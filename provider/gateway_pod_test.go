package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

// typedDeployment is s.deployment() as the typed object it describes.
func typedDeployment(t *testing.T, s *runtimeSpec) *appsv1.Deployment {
	t.Helper()
	b, err := json.Marshal(s.deployment())
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := json.Unmarshal(b, d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestPodSecurity(t *testing.T) {
	for _, tc := range []struct {
		mode   string
		ports  []int32
		sysctl string // the value of net.ipv4.ip_unprivileged_port_start, "" for none
	}{
		{modeSupervise, []int32{8080, 9090}, ""},
		{modeSupervise, []int32{80, 8080}, "80"},
		{modeSidecar, []int32{443, 8443}, "443"},
		{modeSidecar, []int32{8080}, ""},
	} {
		t.Run(fmt.Sprintf("%s %v", tc.mode, tc.ports), func(t *testing.T) {
			s := testSpec()
			s.mode, s.ports = tc.mode, tc.ports
			ps := typedDeployment(t, s).Spec.Template.Spec
			sc := ps.SecurityContext
			if sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) || ptr.Deref(sc.RunAsUser, 0) != 65532 || ptr.Deref(sc.RunAsGroup, 0) != 65532 ||
				ptr.Deref(sc.FSGroup, 0) != 65532 || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Fatalf("pod securityContext = %+v", sc)
			}
			var sysctl string
			for _, s := range sc.Sysctls {
				if s.Name == "net.ipv4.ip_unprivileged_port_start" {
					sysctl = s.Value
				} else {
					t.Errorf("unexpected sysctl %s", s.Name)
				}
			}
			if sysctl != tc.sysctl {
				t.Errorf("ip_unprivileged_port_start = %q, want %q", sysctl, tc.sysctl)
			}
			want := 1
			if tc.mode == modeSidecar {
				want = 2
			}
			if len(ps.Containers) != want {
				t.Fatalf("%d containers, want %d", len(ps.Containers), want)
			}
			for _, c := range ps.Containers {
				csc := c.SecurityContext
				if csc == nil || ptr.Deref(csc.AllowPrivilegeEscalation, true) || !ptr.Deref(csc.ReadOnlyRootFilesystem, false) ||
					csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(csc.Capabilities.Add) != 0 || csc.Privileged != nil {
					t.Errorf("container %s securityContext = %+v", c.Name, csc)
				}
				if c.ImagePullPolicy != corev1.PullIfNotPresent {
					t.Errorf("container %s imagePullPolicy = %q", c.Name, c.ImagePullPolicy)
				}
				var mounts []string
				for _, m := range c.VolumeMounts {
					mounts = append(mounts, m.Name+":"+m.MountPath)
				}
				for _, m := range []string{"state:/var/lib/varnishgw", "tmp:/tmp"} {
					if !slices.Contains(mounts, m) {
						t.Errorf("container %s mounts %v, want %s", c.Name, mounts, m)
					}
				}
			}
		})
	}
}

// fullPodSpec is testSpec with every pod setting and infrastructure
// labels and annotations.
func fullPodSpec() *runtimeSpec {
	s := testSpec()
	s.className = "varnish"
	s.class.pullPolicy = "Always"
	aff, err := decodeAffinity(`{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/arch","operator":"In","values":["amd64"]}]}]}}}`)
	if err != nil {
		panic(err)
	}
	s.pod = podSettings{
		ImagePullSecrets: []string{"registry"},
		NodeSelector:     map[string]string{"pool": "edge"},
		Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "edge", Effect: corev1.TaintEffectNoSchedule},
			{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)}},
		Affinity:          aff,
		TopologySpread:    []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule, MinDomains: ptr.To[int32](2)}},
		PriorityClassName: "edge-critical",
		Labels:            map[string]string{"team": "platform"},
		Annotations:       map[string]string{"prometheus.io/scrape": "true"},
	}
	s.infra = infraSettings{Labels: map[string]string{"cost-center": "42"}, Annotations: map[string]string{"example.com/owner": "edge"}}
	return s
}

func TestPodSettings(t *testing.T) {
	s := fullPodSpec()
	d := typedDeployment(t, s)
	ps := d.Spec.Template.Spec
	if len(ps.ImagePullSecrets) != 1 || ps.ImagePullSecrets[0].Name != "registry" {
		t.Errorf("imagePullSecrets = %v", ps.ImagePullSecrets)
	}
	if !maps.Equal(ps.NodeSelector, s.pod.NodeSelector) || ps.PriorityClassName != "edge-critical" {
		t.Errorf("nodeSelector %v, priorityClassName %q", ps.NodeSelector, ps.PriorityClassName)
	}
	if !equality.Semantic.DeepEqual(ps.Tolerations, s.pod.Tolerations) || !equality.Semantic.DeepEqual(ps.Affinity, s.pod.Affinity) {
		t.Errorf("tolerations %+v, affinity %+v", ps.Tolerations, ps.Affinity)
	}
	if len(ps.TopologySpreadConstraints) != 1 {
		t.Fatalf("topologySpreadConstraints = %+v", ps.TopologySpreadConstraints)
	}
	tsc := ps.TopologySpreadConstraints[0]
	if tsc.LabelSelector == nil || !maps.Equal(tsc.LabelSelector.MatchLabels, gwruntime.Labels(s.gw)) ||
		!slices.Equal(tsc.MatchLabelKeys, []string{"pod-template-hash"}) || ptr.Deref(tsc.MinDomains, 0) != 2 || tsc.TopologyKey != "topology.kubernetes.io/zone" {
		t.Errorf("topology spread constraint = %+v, want the gateway's pod selector and matchLabelKeys pod-template-hash", tsc)
	}
	for _, c := range ps.Containers {
		if c.ImagePullPolicy != corev1.PullAlways {
			t.Errorf("container %s imagePullPolicy = %q, want the class's Always", c.Name, c.ImagePullPolicy)
		}
	}
	pl, pa := d.Spec.Template.Labels, d.Spec.Template.Annotations
	for k, v := range map[string]string{"team": "platform", "cost-center": "42", "gateway.networking.k8s.io/gateway-name": "public",
		"gateway.networking.k8s.io/gateway-class-name": "varnish", "app.kubernetes.io/instance": "varnishgw-public"} {
		if pl[k] != v {
			t.Errorf("pod label %s = %q, want %q (labels %v)", k, pl[k], v, pl)
		}
	}
	for k, v := range map[string]string{"prometheus.io/scrape": "true", "example.com/owner": "edge", StartHashAnnotation: s.startHash()} {
		if pa[k] != v {
			t.Errorf("pod annotation %s = %q, want %q", k, pa[k], v)
		}
	}
	if d.Labels["cost-center"] != "42" || d.Labels["gateway.networking.k8s.io/gateway-name"] != "public" || d.Annotations["example.com/owner"] != "edge" {
		t.Errorf("Deployment labels %v, annotations %v: want the infrastructure's and the Gateway API's", d.Labels, d.Annotations)
	}
	if d.Labels["team"] != "" {
		t.Errorf("pod.labels reached the Deployment: %v", d.Labels)
	}
	if !maps.Equal(d.Spec.Selector.MatchLabels, gwruntime.Labels(s.gw)) {
		t.Errorf("selector = %v, want the runtime labels only", d.Spec.Selector.MatchLabels)
	}
}

func TestStartHashPodSettings(t *testing.T) {
	base := fullPodSpec().startHash()
	for name, change := range map[string]func(*runtimeSpec){
		"pull policy":       func(s *runtimeSpec) { s.class.pullPolicy = "IfNotPresent" },
		"a toleration":      func(s *runtimeSpec) { s.pod.Tolerations = s.pod.Tolerations[:1] },
		"affinity":          func(s *runtimeSpec) { s.pod.Affinity = nil },
		"a node label":      func(s *runtimeSpec) { s.pod.NodeSelector["pool"] = "other" },
		"a pod label":       func(s *runtimeSpec) { s.pod.Labels["team"] = "other" },
		"a pod annotation":  func(s *runtimeSpec) { s.pod.Annotations["x"] = "y" },
		"a pull secret":     func(s *runtimeSpec) { s.pod.ImagePullSecrets = nil },
		"priority class":    func(s *runtimeSpec) { s.pod.PriorityClassName = "" },
		"topology spread":   func(s *runtimeSpec) { s.pod.TopologySpread[0].MaxSkew = 2 },
		"infra label":       func(s *runtimeSpec) { s.infra.Labels["cost-center"] = "43" },
		"infra annotation":  func(s *runtimeSpec) { s.infra.Annotations = nil },
		"the image, always": func(s *runtimeSpec) { s.class.image = "img:3" },
	} {
		s := fullPodSpec()
		change(s)
		if s.startHash() == base {
			t.Errorf("changing %s does not change the start hash, so the plan does not show that the pods roll", name)
		}
	}
}

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
	if !equality.Semantic.DeepEqual(got, s.pod) {
		t.Fatalf("settings() = %+v\nwant %+v", got, s.pod)
	}
	tpl := typedDeployment(t, s).Spec.Template
	// Another manager's annotation, as kubectl rollout restart writes it.
	tpl.Annotations["kubectl.kubernetes.io/restartedAt"] = "2026-01-01T00:00:00Z"

	read := readPod(configured, tpl, s.infra, false)
	if !reflect.DeepEqual(read, configured) {
		t.Errorf("read back:\n%+v\nwant the configuration:\n%+v", read, configured)
	}
	imported := readPod(nil, tpl, s.infra, true)
	if want := normalJSON(s.pod.Affinity); imported.Affinity.ValueString() != want || !strings.HasPrefix(want, `{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution"`) {
		t.Errorf("imported affinity = %s, want the jsonencode form %s", imported.Affinity.ValueString(), want)
	}
	if l := stringMap(imported.Labels); !maps.Equal(l, map[string]string{"team": "platform"}) {
		t.Errorf("imported labels = %v, want pod.labels only (not the selector's, the Gateway API's or the infrastructure's)", l)
	}
	if a := stringMap(imported.Annotations); !maps.Equal(a, map[string]string{"prometheus.io/scrape": "true", "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}) {
		t.Errorf("imported annotations = %v", a)
	}
	if readPod(nil, typedDeployment(t, testSpec()).Spec.Template, infraSettings{}, true) != nil {
		t.Error("a pod without settings reads as a pod attribute")
	}
	if readPod(&podModel{}, typedDeployment(t, testSpec()).Spec.Template, infraSettings{}, false) == nil {
		t.Error("pod = {} read back as null")
	}
}

func TestDeploymentDrift(t *testing.T) {
	want := typedDeployment(t, fullPodSpec())
	if d := deploymentDrift(want.DeepCopy(), want); d != "" {
		t.Errorf("identical Deployments differ in %s", d)
	}
	live := want.DeepCopy()
	live.Spec.Replicas = ptr.To[int32](7) // an attribute shows it
	live.Spec.Template.Spec.Tolerations = nil
	live.Spec.Template.Spec.Containers[0].SecurityContext = nil
	live.Spec.Template.Labels["team"] = "other"
	if d, w := deploymentDrift(live, want), "spec.template.metadata.labels, spec.template.spec.tolerations, spec.template.spec.containers[chaperone].securityContext"; d != w {
		t.Errorf("drift = %q, want %q", d, w)
	}
}

func TestClassDefaultsMerge(t *testing.T) {
	class := func() *classDefaults {
		return &classDefaults{image: "img:1", pullPolicy: "IfNotPresent", storage: "malloc,1g", logLevel: "info", params: map[string]string{"a": "1", "b": "2"}, vcl: "class"}
	}
	d := class()
	if err := d.merge(map[string]string{"image": "img:2", "image-pull-policy": "Always", "storage": "malloc,2g", "log-level": "debug", "varnishd-params.json": `{"b":"3","c":"4"}`}, false); err != nil {
		t.Fatal(err)
	}
	if d.image != "img:2" || d.pullPolicy != "Always" || d.storage != "malloc,2g" || d.logLevel != "debug" || d.vcl != "class" ||
		!maps.Equal(d.params, map[string]string{"a": "1", "b": "3", "c": "4"}) {
		t.Errorf("merged = %+v", d)
	}
	for data, want := range map[string]string{
		`{"user.vcl": "sub vcl_recv {}"}`:           "key user.vcl is a class parameter only",
		`{"replicas": "3"}`:                         `key "replicas" is not a gateway parameter`,
		`{"image-pull-policy": "Sometimes"}`:        `key image-pull-policy is "Sometimes", not Always, IfNotPresent or Never`,
		`{"image": "Bad Image"}`:                    `key image: image = "Bad Image" is not a container image reference`,
		`{"varnishd-params.json": "[1]"}`:           "key varnishd-params.json is not a JSON object of strings",
		`{"varnishd-params.json": "{\"X\":\"1\"}"}`: `"X" is not a varnishd parameter name`,
		`{"log-level": "loud"}`:                     `key log-level is "loud"`,
		`{"access-log": "true"}`:                    "key access-log is a class parameter only",
		`{"external-name-services": "true"}`:        "key external-name-services is a class parameter only; set external_name_services on the varnishgw_gateway_class",
	} {
		var m map[string]string
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatal(err)
		}
		err := class().merge(m, false)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("merge(%s) = %v, want %q", data, err, want)
		}
	}
	d = class()
	if err := d.merge(map[string]string{"access-log": "true"}, true); err != nil || !d.accessLog {
		t.Errorf("class merge of access-log = %v, accessLog %v", err, d.accessLog)
	}
	if err := class().merge(map[string]string{"access-log": "yes"}, true); err == nil || !strings.Contains(err.Error(), `key access-log is "yes", not true or false`) {
		t.Errorf("class merge of access-log=yes = %v", err)
	}
	d = class()
	if err := d.merge(map[string]string{"external-name-services": "true"}, true); err != nil || !d.externalNames {
		t.Errorf("class merge of external-name-services = %v, externalNames %v", err, d.externalNames)
	}
	if err := class().merge(map[string]string{"external-name-services": "on"}, true); err == nil || !strings.Contains(err.Error(), `key external-name-services is "on", not true or false`) {
		t.Errorf("class merge of external-name-services=on = %v", err)
	}
	// A class's ConfigMap may hold user.vcl and keys of other versions.
	d = class()
	if err := d.merge(map[string]string{"user.vcl": "new", "future-key": "x"}, true); err != nil || d.vcl != "new" {
		t.Errorf("class merge = %v, vcl %q", err, d.vcl)
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

// TestPodSysctls: the sysctls attribute follows the provider's own sysctl
// in the pods' security context, by name; without it (nil or empty) the
// pod template is the same as before the attribute existed.
func TestPodSysctls(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ports   []int32
		sysctls map[string]string
		want    []string // name=value
	}{
		{"none, low port", []int32{80, 8080}, nil, []string{"net.ipv4.ip_unprivileged_port_start=80"}},
		{"none, high ports", []int32{8080}, nil, nil},
		{"after the provider's", []int32{443}, map[string]string{"net.ipv4.tcp_migrate_req": "1"},
			[]string{"net.ipv4.ip_unprivileged_port_start=443", "net.ipv4.tcp_migrate_req=1"}},
		{"alone with high ports", []int32{8443}, map[string]string{"net.ipv4.tcp_migrate_req": "1"}, []string{"net.ipv4.tcp_migrate_req=1"}},
		{"by name", []int32{80}, map[string]string{"net.ipv4.tcp_syncookies": "1", "kernel.shm_rmid_forced": "1", "net.ipv4.tcp_migrate_req": "1"},
			[]string{"net.ipv4.ip_unprivileged_port_start=80", "kernel.shm_rmid_forced=1", "net.ipv4.tcp_migrate_req=1", "net.ipv4.tcp_syncookies=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec()
			s.ports, s.sysctls = tc.ports, tc.sysctls
			var got []string
			for _, sc := range typedDeployment(t, s).Spec.Template.Spec.SecurityContext.Sysctls {
				got = append(got, sc.Name+"="+sc.Value)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("sysctls = %q, want %q", got, tc.want)
			}
		})
	}
	withNil, withEmpty := testSpec(), testSpec()
	withEmpty.sysctls = map[string]string{}
	a, errA := json.Marshal(withNil.deployment())
	b, errB := json.Marshal(withEmpty.deployment())
	if errA != nil || errB != nil || string(a) != string(b) {
		t.Errorf("an empty sysctls map changes the Deployment (%v, %v):\n%s\n%s", errA, errB, a, b)
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
	own := corev1.Sysctl{Name: unprivilegedPortSysctl, Value: "80"}
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
