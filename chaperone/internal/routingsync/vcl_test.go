package routingsync

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/vcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

func TestProgrammedCombinesVCLAndRouting(t *testing.T) {
	invalid := errors.New("fragment ConfigMap x: bad")
	unreachable := errors.New("reload ghost: HTTP 503")
	vclBad := errors.New(`key "main.vcl" of ConfigMap ns/varnishgw-gw-vcl does not compile`)
	waiting := errors.New("waiting for ConfigMap ns/varnishgw-gw-vcl")
	for _, tc := range []struct {
		name    string
		r       routingState
		v       *vcl.Status
		status  metav1.ConditionStatus
		reason  string
		message []string
		absent  string
	}{
		{"no VCL source, loaded", routingState{generation: 3, err: nil, pending: false}, nil, "True", "Programmed", []string{"ghost loaded"}, ""},
		{"no VCL source, invalid", routingState{generation: 3, err: invalid, pending: false}, nil, "False", "Invalid", []string{"fragment ConfigMap x"}, ""},
		{"VCL active, loaded", routingState{generation: 3, err: nil, pending: false}, &vcl.Status{Active: true}, "True", "Programmed", []string{"main VCL is active"}, ""},
		{"VCL active, routing invalid", routingState{generation: 3, err: invalid, pending: false}, &vcl.Status{Active: true}, "False", "Invalid", []string{"fragment ConfigMap x"}, ""},
		{"ConfigMap missing hides ghost's 503", routingState{generation: 3, err: unreachable, pending: true}, &vcl.Status{Err: waiting, Pending: true}, "False", "Pending", []string{"waiting for ConfigMap"}, "503"},
		{"first VCL does not compile", routingState{generation: 3, err: unreachable, pending: true}, &vcl.Status{Err: vclBad}, "False", "Invalid", []string{"does not compile"}, "503"},
		{"later VCL does not compile, routing fine", routingState{generation: 3, err: nil, pending: false}, &vcl.Status{Active: true, Err: vclBad}, "False", "Invalid", []string{"does not compile"}, "routing:"},
		{"fragments rejected", routingState{generation: 3, rejected: []vgwapi.Rejection{{Name: "vgw-x", ResourceVersion: "7"}}}, &vcl.Status{Active: true}, "True", "Programmed", []string{"main VCL is active", "1 routing fragment(s) rejected", "vgw-x", "kubectl get gatewaypodreports"}, ""},
		{"both broken", routingState{generation: 3, err: invalid, pending: false}, &vcl.Status{Active: true, Err: waiting, Pending: true}, "False", "Invalid", []string{"waiting for ConfigMap", "routing: fragment ConfigMap x"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := programmed(tc.r, tc.v)
			if p.Generation != 3 || p.Status != tc.status || string(p.Reason) != tc.reason {
				t.Errorf("= %+v, want generation 3, %s/%s", p, tc.status, tc.reason)
			}
			for _, m := range tc.message {
				if !strings.Contains(p.Message, m) {
					t.Errorf("message %q lacks %q", p.Message, m)
				}
			}
			if tc.absent != "" && strings.Contains(p.Message, tc.absent) {
				t.Errorf("message %q contains %q", p.Message, tc.absent)
			}
		})
	}
}
