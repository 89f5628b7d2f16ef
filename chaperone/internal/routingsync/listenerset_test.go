package routingsync

import (
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// TestBuildListenerSets: the chaperone's build serves the ListenerSet
// listeners of the Gateway's annotation, on their own socket, with the
// routes attached to them; a bad annotation makes the build fail, naming
// it, so the sync is invalid and ghost keeps its file.
func TestBuildListenerSets(t *testing.T) {
	from := gatewayv1.NamespacesFromSame
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw", Annotations: map[string]string{
			routing.ListenerSetListenersAnnotation: `[{"name":"infra/team/extra","hostname":"team.example.com","port":9090,"protocol":"HTTP"}]`,
		}},
		Spec: gatewayv1.GatewaySpec{
			Listeners:        []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}},
			AllowedListeners: &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: &from}},
		},
	}
	frag := &routing.Fragment{
		Version:   routing.FragmentVersion,
		Gateway:   object.Ref{Namespace: "infra", Name: "gw"},
		Route:     routing.RouteRef{Namespace: "infra", Name: "team"},
		Listeners: []routing.AttachedListener{{Name: "infra/team/extra", Port: 9090, Hostnames: []string{"team.example.com"}}},
		Rules:     []routing.Rule{{Matches: []ghostjson.Match{{Path: ghostjson.PathMatch{Type: ghostjson.PathPrefix, Value: "/"}}}}},
	}
	table, doc, err := Build(&State{Gateway: gw, Fragments: []*routing.Fragment{frag}})
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Conflicts) > 0 {
		t.Errorf("conflicts: %v", table.Conflicts)
	}
	var got []string
	for _, v := range doc.VHosts {
		got = append(got, v.Hostname+"@"+strings.Join(v.Listeners, ",")+"="+strconv.Itoa(len(v.Routes)))
	}
	if want := "*@port-80=0 team.example.com@port-9090=1"; strings.Join(got, " ") != want {
		t.Errorf("vhosts %v, want %s", got, want)
	}

	gw.Annotations[routing.ListenerSetListenersAnnotation] = `[{"name":"extra","port":9090,"protocol":"HTTP"}]`
	if _, _, err := Build(&State{Gateway: gw, Fragments: []*routing.Fragment{frag}}); err == nil ||
		!strings.Contains(err.Error(), routing.ListenerSetListenersAnnotation) {
		t.Errorf("Build with a bad annotation: %v, want an error naming the annotation", err)
	}
}
