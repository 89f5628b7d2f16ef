package control

import (
	"slices"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestRolledOut(t *testing.T) {
	two := int32(2)
	for _, tc := range []struct {
		name string
		gen  int64
		st   appsv1.DeploymentStatus
		want bool
	}{
		{"not observed", 2, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}, false},
		{"not all updated", 1, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 2}, false},
		{"old replicas left", 1, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 2, AvailableReplicas: 2}, false},
		{"not available", 1, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 1}, false},
		{"done", 1, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: tc.gen}, Spec: appsv1.DeploymentSpec{Replicas: &two}, Status: tc.st}
			if got, why := RolledOut(d); got != tc.want {
				t.Errorf("RolledOut = %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}

func TestServiceAddresses(t *testing.T) {
	for _, tc := range []struct {
		name string
		svc  corev1.Service
		want []string
	}{
		{"cluster IP", corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1", ClusterIPs: []string{"10.0.0.1", "fd00::1"}}}, []string{"10.0.0.1", "fd00::1"}},
		{"headless", corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "None"}}, nil},
		{"load balancer wins", corev1.Service{
			Spec:   corev1.ServiceSpec{ClusterIP: "10.0.0.1"},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}, {Hostname: "lb.example.com"}}}},
		}, []string{"203.0.113.7", "lb.example.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, a := range ServiceAddresses(&tc.svc) {
				got = append(got, a.Value)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("addresses = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPodsCountRoutes(t *testing.T) {
	entry := func(manager, sub, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Subresource: sub, Operation: metav1.ManagedFieldsOperationApply,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
	}
	pods := `{"f:status":{"f:listeners":{"k:{\"name\":\"http\"}":{".":{},"f:attachedRoutes":{},"f:name":{}}}}}`
	tls := `{"f:status":{"f:listeners":{"k:{\"name\":\"http\"}":{".":{},"f:conditions":{},"f:name":{}}}}}`
	tests := []struct {
		name     string
		fields   []metav1.ManagedFieldsEntry
		listener gatewayv1.SectionName
		want     bool
	}{
		{"the pods own it", []metav1.ManagedFieldsEntry{entry(gwruntime.RoutesFieldManager, "status", pods)}, "http", true},
		{"another listener", []metav1.ManagedFieldsEntry{entry(gwruntime.RoutesFieldManager, "status", pods)}, "alt", false},
		{"no pod wrote it", []metav1.ManagedFieldsEntry{entry(FieldManager, "status", pods)}, "http", false},
		{"the pods own another field of the entry", []metav1.ManagedFieldsEntry{entry(gwruntime.RoutesFieldManager, "status", tls)}, "http", false},
		{"not the status", []metav1.ManagedFieldsEntry{entry(gwruntime.RoutesFieldManager, "", pods)}, "http", false},
		{"unreadable fields", []metav1.ManagedFieldsEntry{entry(gwruntime.RoutesFieldManager, "status", `{`)}, "http", false},
		{"none", nil, "http", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{ManagedFields: tt.fields}}
			if got := podsCountRoutes(gw, tt.listener); got != tt.want {
				t.Errorf("podsCountRoutes = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestStaleListenerPatch: the patch tests the resource version and removes
// the status entries of listeners the spec no longer names, from the last
// (so that each index still points at its entry); none when every entry
// is in the spec.
func TestStaleListenerPatch(t *testing.T) {
	for _, tc := range []struct {
		name         string
		spec, status []gatewayv1.SectionName
		want         string
	}{
		{"all in the spec", []gatewayv1.SectionName{"a", "b"}, []gatewayv1.SectionName{"b", "a"}, ""},
		{"no status", []gatewayv1.SectionName{"a"}, nil, ""},
		{"one gone", []gatewayv1.SectionName{"a"}, []gatewayv1.SectionName{"a", "b"},
			`[{"op":"test","path":"/metadata/resourceVersion","value":"7"},{"op":"remove","path":"/status/listeners/1"}]`},
		{"two gone, last first", []gatewayv1.SectionName{"b"}, []gatewayv1.SectionName{"a", "b", "c"},
			`[{"op":"test","path":"/metadata/resourceVersion","value":"7"},{"op":"remove","path":"/status/listeners/2"},{"op":"remove","path":"/status/listeners/0"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(staleListenerPatch("7", tc.spec, tc.status)); got != tc.want {
				t.Errorf("staleListenerPatch = %s, want %s", got, tc.want)
			}
		})
	}
}
