package provider

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
)

// TestInvalidationEndpointRuntime: invalidation_endpoint_port gives the
// chaperone --invalidate-addr=:PORT, the chaperone container (in both
// modes: the varnish container of sidecar mode never has it) the
// container port "invalidate", and the pods' Role the endpoint's rules;
// unset, none of them, so existing gateways' pods and Roles do not change.
func TestInvalidationEndpointRuntime(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec *gwruntime.Spec
		port int32
	}{
		{"supervise, off", testSpec(), 0},
		{"supervise, on", testSpec(), 9092},
		{"sidecar HTTPS, off", httpsSpec(gwruntime.ModeSidecar), 0},
		{"sidecar HTTPS, on", httpsSpec(gwruntime.ModeSidecar), 9092},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.spec
			s.InvalidatePort = tc.port
			args := s.ChaperoneArgs()
			hasFlag := slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--invalidate-addr") })
			if want := tc.port != 0; hasFlag != want || (want && !slices.Contains(args, "--invalidate-addr=:9092")) {
				t.Errorf("chaperone args %q: want --invalidate-addr=:9092 %v", args, want)
			}
			f, err := gwruntime.ParseChaperoneArgs(args)
			if err != nil {
				t.Fatal(err)
			}
			if got := invalidationPortOf(f.InvalidateAddr); got.ValueInt64() != int64(tc.port) || got.IsNull() != (tc.port == 0) {
				t.Errorf("invalidation_endpoint_port read back from %q = %v, want %d", f.InvalidateAddr, got, tc.port)
			}

			d := s.Deployment()
			for _, c := range d.Spec.Template.Spec.Containers {
				var port int32
				for _, p := range c.Ports {
					if *p.Name == gwruntime.InvalidatePortName {
						port = *p.ContainerPort
					}
				}
				want := int32(0)
				if *c.Name == gwruntime.ChaperoneContainer {
					want = tc.port
				}
				if port != want {
					t.Errorf("container %s: port %q = %d, want %d", *c.Name, gwruntime.InvalidatePortName, port, want)
				}
			}

			rules := s.GatewayRules()
			endpoint := gwruntime.InvalidateEndpointRules()
			has := len(rules) >= len(endpoint) && cmp.Equal(rules[len(rules)-len(endpoint):], endpoint)
			if has != (tc.port != 0) {
				t.Errorf("Role rules %+v: the endpoint's rules present %v, want %v", rules, has, tc.port != 0)
			}
			base := append(gwruntime.GatewayRules(s.Gateway), gwruntime.CertificateRules(s.CertificateSecretNames()[s.Gateway.Namespace], false)...)
			if !cmp.Equal(rules[:len(base)], base) {
				t.Errorf("Role rules %+v do not start with the gateway's own %+v", rules, base)
			}
		})
	}
}

// TestInvalidationEndpointStartHash: turning the endpoint on or changing
// its port changes the start hash, so the pods roll with the new flag.
func TestInvalidationEndpointStartHash(t *testing.T) {
	s := testSpec()
	off := s.StartHash()
	s.InvalidatePort = 9092
	on := s.StartHash()
	s.InvalidatePort = 9093
	other := s.StartHash()
	if off == on || on == other {
		t.Errorf("start hashes off %s, 9092 %s, 9093 %s: want all different", off, on, other)
	}
}

func TestValidateInvalidationPort(t *testing.T) {
	listeners := []listenerModel{
		{Name: types.StringValue("http"), Port: types.Int64Value(8080)},
		{Name: types.StringValue("https"), Port: types.Int64Value(8443)},
	}
	for _, tc := range []struct {
		port    types.Int64
		wantErr string
	}{
		{types.Int64Null(), ""},
		{types.Int64Unknown(), ""},
		{types.Int64Value(9092), ""},
		{types.Int64Value(8443), `invalidation_endpoint_port = 8443 is the port of listener "https"`},
		{types.Int64Value(9091), "invalidation_endpoint_port = 9091 is the port of the chaperone's health server"},
		{types.Int64Value(6082), "invalidation_endpoint_port = 6082 is the port of varnishd's admin connection"},
		{types.Int64Value(6084), "invalidation_endpoint_port = 6084 is the port of ghost's admin connection"},
	} {
		t.Run(tc.port.String(), func(t *testing.T) {
			m := &gatewayModel{Listeners: listeners, InvalidationPort: tc.port}
			var diags diag.Diagnostics
			m.validateInvalidationPort(&diags)
			switch {
			case tc.wantErr == "" && diags.HasError():
				t.Errorf("unexpected error: %v", diags)
			case tc.wantErr != "" && (!diags.HasError() || !strings.Contains(diags[0].Detail(), tc.wantErr)):
				t.Errorf("diagnostics %v, want an error containing %q", diags, tc.wantErr)
			}
		})
	}
}

// TestProviderRulesAuthDelegator: the provider may bind exactly
// system:auth-delegator, and write ClusterRoleBindings, nothing broader.
func TestProviderRulesAuthDelegator(t *testing.T) {
	var binds, crbs []rbacv1.PolicyRule
	for _, r := range ProviderClusterRules() {
		if slices.Contains(r.Verbs, "bind") || slices.Contains(r.Verbs, "escalate") || slices.Contains(r.Verbs, "*") {
			binds = append(binds, r)
		}
		if slices.Contains(r.Resources, "clusterrolebindings") {
			crbs = append(crbs, r)
		}
	}
	wantBind := []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"},
		ResourceNames: []string{gwruntime.AuthDelegatorClusterRole}, Verbs: []string{"bind"}}}
	if diff := cmp.Diff(wantBind, binds); diff != "" {
		t.Errorf("bind rules (-want +got):\n%s", diff)
	}
	wantCRB := []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterrolebindings"},
		Verbs: []string{"get", "create", "patch", "delete"}}}
	if diff := cmp.Diff(wantCRB, crbs); diff != "" {
		t.Errorf("clusterrolebindings rules (-want +got):\n%s", diff)
	}
	for _, r := range ProviderNamespaceRules() {
		if slices.Contains(r.Verbs, "bind") || slices.Contains(r.Resources, "clusterrolebindings") {
			t.Errorf("namespace rule %+v binds or writes ClusterRoleBindings", r)
		}
	}
}
