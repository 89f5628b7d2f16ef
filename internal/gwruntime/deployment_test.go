package gwruntime

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

// typedDeployment is s.Deployment() as the typed object it describes.
func typedDeployment(t *testing.T, s *Spec) *appsv1.Deployment {
	t.Helper()
	b, err := json.Marshal(s.Deployment())
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
		{ModeSupervise, []int32{8080, 9090}, ""},
		{ModeSupervise, []int32{80, 8080}, "80"},
		{ModeSidecar, []int32{443, 8443}, "443"},
		{ModeSidecar, []int32{8080}, ""},
	} {
		t.Run(fmt.Sprintf("%s %v", tc.mode, tc.ports), func(t *testing.T) {
			s := testSpec()
			s.Mode, s.Ports = tc.mode, tc.ports
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
			if tc.mode == ModeSidecar {
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
func fullPodSpec() *Spec {
	s := testSpec()
	s.ClassName = "varnish"
	s.Class.PullPolicy = "Always"
	aff := &corev1.Affinity{}
	if err := json.Unmarshal([]byte(`{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/arch","operator":"In","values":["amd64"]}]}]}}}`), aff); err != nil {
		panic(err)
	}
	s.Pod = PodSettings{
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
	s.Infra = InfraSettings{Labels: map[string]string{"cost-center": "42"}, Annotations: map[string]string{"example.com/owner": "edge"}}
	return s
}

func TestPodSettings(t *testing.T) {
	s := fullPodSpec()
	d := typedDeployment(t, s)
	ps := d.Spec.Template.Spec
	if len(ps.ImagePullSecrets) != 1 || ps.ImagePullSecrets[0].Name != "registry" {
		t.Errorf("imagePullSecrets = %v", ps.ImagePullSecrets)
	}
	if !maps.Equal(ps.NodeSelector, s.Pod.NodeSelector) || ps.PriorityClassName != "edge-critical" {
		t.Errorf("nodeSelector %v, priorityClassName %q", ps.NodeSelector, ps.PriorityClassName)
	}
	if !equality.Semantic.DeepEqual(ps.Tolerations, s.Pod.Tolerations) || !equality.Semantic.DeepEqual(ps.Affinity, s.Pod.Affinity) {
		t.Errorf("tolerations %+v, affinity %+v", ps.Tolerations, ps.Affinity)
	}
	if len(ps.TopologySpreadConstraints) != 1 {
		t.Fatalf("topologySpreadConstraints = %+v", ps.TopologySpreadConstraints)
	}
	tsc := ps.TopologySpreadConstraints[0]
	if tsc.LabelSelector == nil || !maps.Equal(tsc.LabelSelector.MatchLabels, Labels(s.Gateway)) ||
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
	for k, v := range map[string]string{"prometheus.io/scrape": "true", "example.com/owner": "edge", StartHashAnnotation: s.StartHash()} {
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
	if !maps.Equal(d.Spec.Selector.MatchLabels, Labels(s.Gateway)) {
		t.Errorf("selector = %v, want the runtime labels only", d.Spec.Selector.MatchLabels)
	}
}

func TestStartHashPodSettings(t *testing.T) {
	base := fullPodSpec().StartHash()
	for name, change := range map[string]func(*Spec){
		"pull policy":       func(s *Spec) { s.Class.PullPolicy = "IfNotPresent" },
		"a toleration":      func(s *Spec) { s.Pod.Tolerations = s.Pod.Tolerations[:1] },
		"affinity":          func(s *Spec) { s.Pod.Affinity = nil },
		"a node label":      func(s *Spec) { s.Pod.NodeSelector["pool"] = "other" },
		"a pod label":       func(s *Spec) { s.Pod.Labels["team"] = "other" },
		"a pod annotation":  func(s *Spec) { s.Pod.Annotations["x"] = "y" },
		"a pull secret":     func(s *Spec) { s.Pod.ImagePullSecrets = nil },
		"priority class":    func(s *Spec) { s.Pod.PriorityClassName = "" },
		"topology spread":   func(s *Spec) { s.Pod.TopologySpread[0].MaxSkew = 2 },
		"infra label":       func(s *Spec) { s.Infra.Labels["cost-center"] = "43" },
		"infra annotation":  func(s *Spec) { s.Infra.Annotations = nil },
		"the image, always": func(s *Spec) { s.Class.Image = "img:3" },
	} {
		s := fullPodSpec()
		change(s)
		if s.StartHash() == base {
			t.Errorf("changing %s does not change the start hash, so the plan does not show that the pods roll", name)
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
			s.Ports, s.Sysctls = tc.ports, tc.sysctls
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
	withEmpty.Sysctls = map[string]string{}
	a, errA := json.Marshal(withNil.Deployment())
	b, errB := json.Marshal(withEmpty.Deployment())
	if errA != nil || errB != nil || string(a) != string(b) {
		t.Errorf("an empty sysctls map changes the Deployment (%v, %v):\n%s\n%s", errA, errB, a, b)
	}
}
