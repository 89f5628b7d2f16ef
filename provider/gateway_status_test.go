package provider

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
)

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
