package control

import (
	"encoding/json"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestDeploymentDrift(t *testing.T) {
	want := typedDeployment(t, driftSpec())
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

// driftSpec is a supervise-mode gateway whose pods have a toleration.
func driftSpec() *gwruntime.Spec {
	return &gwruntime.Spec{
		Gateway:      object.Ref{Namespace: "edge", Name: "public"},
		Class:        &gwruntime.Class{Image: "img:1", PullPolicy: "IfNotPresent", Storage: "malloc,1g", LogLevel: "info"},
		Ports:        []int32{80},
		Replicas:     2,
		Mode:         gwruntime.ModeSupervise,
		DrainTimeout: 60,
		Pod: gwruntime.PodSettings{Labels: map[string]string{"team": "edge"},
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "edge", Effect: corev1.TaintEffectNoSchedule}}},
	}
}

// typedDeployment is the Deployment s renders, as its typed object.
func typedDeployment(t *testing.T, s *gwruntime.Spec) *appsv1.Deployment {
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
