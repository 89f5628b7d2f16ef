package routing

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func listenerSet(ns, name string, age time.Duration, entries ...gatewayv1.Listener) *gatewayv1.ListenerSet {
	ls := &gatewayv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0.Add(age))},
		Spec: gatewayv1.ListenerSetSpec{ParentRef: gatewayv1.ParentGatewayReference{
			Name: "gw", Namespace: ptr(gatewayv1.Namespace("infra")),
		}},
	}
	for _, l := range entries {
		ls.Spec.Listeners = append(ls.Spec.Listeners, gatewayv1.ListenerEntry(l))
	}
	return ls
}

func allowListeners(gw *gatewayv1.Gateway, from gatewayv1.FromNamespaces, sel *metav1.LabelSelector) *gatewayv1.Gateway {
	gw.Spec.AllowedListeners = &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: &from, Selector: sel}}
	return gw
}

// outcome summarises a composition: each ListenerSet's Accepted reason,
// each listener's Accepted reason (with "!" when False), in order.
func outcome(c *ComposedGateway) string {
	var b []string
	for _, r := range c.ListenerSets {
		s := r.Set.Name + "=" + condStr(r.Conditions, "Accepted")
		for _, l := range r.Listeners {
			s += " " + l.Name + ":" + condStr(l.Conditions, "Accepted")
		}
		b = append(b, s)
	}
	return strings.Join(b, "; ")
}

func TestComposeGateway(t *testing.T) {
	labelled := namespace("apps", map[string]string{"team": "a"})
	tests := []struct {
		name      string
		gw        *gatewayv1.Gateway
		sets      []*gatewayv1.ListenerSet
		want      string
		listeners []string // the composed Gateway's listener names
	}{
		{
			name:      "default admits none",
			gw:        gateway(listener("http", 80, "")),
			sets:      []*gatewayv1.ListenerSet{listenerSet("infra", "ls", 0, listener("a", 8080, ""))},
			want:      "ls=!NotAllowed",
			listeners: []string{"http"},
		},
		{
			name:      "None",
			gw:        allowListeners(gateway(listener("http", 80, "")), gatewayv1.NamespacesFromNone, nil),
			sets:      []*gatewayv1.ListenerSet{listenerSet("infra", "ls", 0, listener("a", 8080, ""))},
			want:      "ls=!NotAllowed",
			listeners: []string{"http"},
		},
		{
			name:      "Same admits the Gateway's namespace only",
			gw:        allowListeners(gateway(listener("http", 80, "")), gatewayv1.NamespacesFromSame, nil),
			sets:      []*gatewayv1.ListenerSet{listenerSet("infra", "ls", 0, listener("a", 8080, "")), listenerSet("apps", "other", 0, listener("a", 8081, ""))},
			want:      "other=!NotAllowed; ls=Accepted a:Accepted",
			listeners: []string{"http", "infra/ls/a"},
		},
		{
			name:      "Selector",
			gw:        allowListeners(gateway(listener("http", 80, "")), gatewayv1.NamespacesFromSelector, &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}),
			sets:      []*gatewayv1.ListenerSet{listenerSet("infra", "ls", 0, listener("a", 8080, "")), listenerSet("apps", "other", 0, listener("a", 8081, ""))},
			want:      "other=Accepted a:Accepted; ls=!NotAllowed",
			listeners: []string{"http", "apps/other/a"},
		},
		{
			name: "the Gateway's listeners win, then the older ListenerSet",
			gw:   allowListeners(gateway(listener("http", 80, "a.example")), gatewayv1.NamespacesFromAll, nil),
			sets: []*gatewayv1.ListenerSet{
				listenerSet("infra", "young", time.Minute, listener("x", 80, "b.example"), listener("y", 80, "c.example")),
				listenerSet("infra", "old", 0, listener("x", 80, "a.example"), listener("y", 80, "b.example")),
			},
			want:      "old=Accepted x:!HostnameConflict y:Accepted; young=Accepted x:!HostnameConflict y:Accepted",
			listeners: []string{"http", "infra/old/y", "infra/young/y"},
		},
		{
			name: "same creation time: namespace/name decides",
			gw:   allowListeners(gateway(listener("http", 80, "")), gatewayv1.NamespacesFromAll, nil),
			sets: []*gatewayv1.ListenerSet{
				listenerSet("infra", "b", 0, listener("x", 8080, "")),
				listenerSet("infra", "a", 0, listener("x", 8080, "")),
			},
			want:      "a=Accepted x:Accepted; b=!ListenersNotValid x:!HostnameConflict",
			listeners: []string{"http", "infra/a/x"},
		},
		{
			name: "protocol conflict and unsupported protocols",
			gw:   allowListeners(gateway(httpsListener("https", 443, "", gatewayv1.SecretObjectReference{Name: "cert"})), gatewayv1.NamespacesFromAll, nil),
			sets: []*gatewayv1.ListenerSet{listenerSet("infra", "ls", 0,
				listener("plain", 443, "x.example"),
				httpsListener("tls", 8443, "", gatewayv1.SecretObjectReference{Name: "cert"}),
				func() gatewayv1.Listener {
					l := listener("tcp", 9000, "")
					l.Protocol = gatewayv1.TCPProtocolType
					return l
				}(),
				listener("ok", 8080, ""))},
			want:      "ls=Accepted plain:!ProtocolConflict tls:Accepted tcp:!UnsupportedProtocol ok:Accepted",
			listeners: []string{"https", "infra/ls/tls", "infra/ls/ok"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := &Objects{Namespaces: []*corev1.Namespace{labelled}}
			c := ComposeGateway(tt.gw, tt.sets, objs)
			if got := outcome(c); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			var names []string
			for _, l := range c.Gateway.Spec.Listeners {
				names = append(names, string(l.Name))
			}
			if strings.Join(names, ",") != strings.Join(tt.listeners, ",") {
				t.Errorf("listeners %v, want %v", names, tt.listeners)
			}
			// Composing the composed Gateway again changes nothing, and
			// the input is not changed.
			again := ComposeGateway(c.Gateway, tt.sets, objs)
			if outcome(again) != outcome(c) || len(again.Gateway.Spec.Listeners) != len(c.Gateway.Spec.Listeners) {
				t.Errorf("composing twice: %s, %d listeners", outcome(again), len(again.Gateway.Spec.Listeners))
			}
			if len(tt.gw.Spec.Listeners) != 1 {
				t.Errorf("the input Gateway was changed: %d listeners", len(tt.gw.Spec.Listeners))
			}
		})
	}
}

func TestAttachListenerSet(t *testing.T) {
	gw := allowListeners(gateway(listener("http", 80, "gw.example")), gatewayv1.NamespacesFromAll, nil)
	same := listenerSet("apps", "ls", 0, listener("a", 8080, "a.example"), fromNS(listener("b", 8080, "b.example"), gatewayv1.NamespacesFromAll, nil))
	objs := &Objects{ListenerSets: []*gatewayv1.ListenerSet{same}}
	toSet := func(ns, name, section string) routeOpt {
		return func(r *gatewayv1.HTTPRoute) {
			pr := gatewayv1.ParentReference{Group: ptr(gatewayv1.Group(gatewayv1.GroupName)), Kind: ptr(gatewayv1.Kind("ListenerSet")), Name: gatewayv1.ObjectName(name), Namespace: ptr(gatewayv1.Namespace(ns))}
			if section != "" {
				pr.SectionName = ptr(gatewayv1.SectionName(section))
			}
			r.Spec.ParentRefs = []gatewayv1.ParentReference{pr}
		}
	}
	tests := []struct {
		name      string
		route     *gatewayv1.HTTPRoute
		objs      *Objects
		want      string
		listeners string
	}{
		{"whole ListenerSet, same namespace", route("apps", "r", toSet("apps", "ls", "")), objs, "Accepted", "apps/ls/a,apps/ls/b"},
		{"whole ListenerSet, other namespace: only the From All listener", route("infra", "r", toSet("apps", "ls", "")), objs, "Accepted", "apps/ls/b"},
		{"sectionName", route("apps", "r", toSet("apps", "ls", "b")), objs, "Accepted", "apps/ls/b"},
		{"sectionName of a Gateway listener", route("apps", "r", toSet("apps", "ls", "http")), objs, "!NoMatchingParent", ""},
		{"From Same is the ListenerSet's namespace", route("infra", "r", toSet("apps", "ls", "a")), objs, "!NotAllowedByListeners", ""},
		{"Gateway parent sees no ListenerSet listener", route("infra", "r", section("a")), objs, "!NoMatchingParent", ""},
		{"ListenerSet not admitted", route("apps", "r", toSet("apps", "ls", "")), &Objects{ListenerSets: []*gatewayv1.ListenerSet{same}}, "", ""},
		{"already composed Gateway", route("apps", "r", toSet("apps", "ls", "a")), &Objects{}, "Accepted", "apps/ls/a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gw
			switch tt.name {
			case "ListenerSet not admitted":
				g = gateway(listener("http", 80, "gw.example"))
			case "already composed Gateway":
				g = ComposeGateway(gw, []*gatewayv1.ListenerSet{same}, nil).Gateway
			}
			f, err := Attach(g, tt.route, tt.objs)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if want == "" {
				want = "!NotAllowedByListeners"
			}
			if got := condition(f, gatewayv1.RouteConditionAccepted); got != want {
				t.Errorf("Accepted %s, want %s (%s)", got, want, f.Parents[0].Conditions[0].Message)
			}
			var ls []string
			for _, l := range f.Listeners {
				ls = append(ls, l.Name)
			}
			if strings.Join(ls, ",") != tt.listeners {
				t.Errorf("listeners %v, want %s", ls, tt.listeners)
			}
		})
	}
	// A ListenerSet of another Gateway is not a parent.
	other := route("apps", "r", toSet("apps", "elsewhere", ""))
	if _, err := Attach(gw, other, objs); err == nil {
		t.Error("a route naming an unknown ListenerSet attached")
	}
}

func TestValidateListenerSet(t *testing.T) {
	ok := listenerSet("apps", "ls", 0, listener("a", 8080, "a.example"))
	tests := []struct {
		name    string
		mutate  func(*gatewayv1.ListenerSet)
		wantErr string
	}{
		{"valid", func(*gatewayv1.ListenerSet) {}, ""},
		{"parent kind", func(ls *gatewayv1.ListenerSet) { ls.Spec.ParentRef.Kind = ptr(gatewayv1.Kind("ListenerSet")) }, `spec.parentRef.kind: Unsupported value: "ListenerSet"`},
		{"no listeners", func(ls *gatewayv1.ListenerSet) { ls.Spec.Listeners = nil }, "spec.listeners: Required"},
		{"https", func(ls *gatewayv1.ListenerSet) {
			ls.Spec.Listeners[0].Protocol = gatewayv1.HTTPSProtocolType
			ls.Spec.Listeners[0].TLS = &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "c"}}}
		}, ""},
		{"https without tls", func(ls *gatewayv1.ListenerSet) { ls.Spec.Listeners[0].Protocol = gatewayv1.HTTPSProtocolType }, "spec.listeners[0].tls: Required"},
		{"https passthrough", func(ls *gatewayv1.ListenerSet) {
			ls.Spec.Listeners[0].Protocol = gatewayv1.HTTPSProtocolType
			ls.Spec.Listeners[0].TLS = &gatewayv1.ListenerTLSConfig{Mode: ptr(gatewayv1.TLSModePassthrough), CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "c"}}}
		}, `spec.listeners[0].tls.mode: Unsupported value: "Passthrough"`},
		{"http with tls", func(ls *gatewayv1.ListenerSet) {
			ls.Spec.Listeners[0].TLS = &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "c"}}}
		}, "spec.listeners[0].tls: Forbidden"},
		{"duplicate port and hostname", func(ls *gatewayv1.ListenerSet) {
			ls.Spec.Listeners = append(ls.Spec.Listeners, gatewayv1.ListenerEntry{Name: "b", Port: 8080, Protocol: gatewayv1.HTTPProtocolType, Hostname: ptr(gatewayv1.Hostname("a.example"))})
		}, "listener a already serves this hostname on port 8080"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls := ok.DeepCopy()
			tt.mutate(ls)
			err := ValidateListenerSet(ls).ToAggregate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestValidateAllowedListeners(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
	tests := []struct {
		from    gatewayv1.FromNamespaces
		sel     *metav1.LabelSelector
		wantErr string
	}{
		{gatewayv1.NamespacesFromAll, nil, ""},
		{gatewayv1.NamespacesFromSelector, sel, ""},
		{gatewayv1.NamespacesFromSelector, nil, "spec.allowedListeners.namespaces.selector: Required"},
		{gatewayv1.NamespacesFromSame, sel, "a selector applies to from: Selector only"},
		{"Some", nil, `spec.allowedListeners.namespaces.from: Unsupported value: "Some"`},
	}
	for _, tt := range tests {
		err := ValidateAllowedListeners(allowListeners(gateway(listener("a", 80, "")), tt.from, tt.sel)).ToAggregate()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: got %v", tt.from, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: got %v, want %q", tt.from, err, tt.wantErr)
		}
	}
}

func TestListenerSetListenersAnnotation(t *testing.T) {
	gw := allowListeners(gateway(listener("http", 80, "gw.example")), gatewayv1.NamespacesFromAll, nil)
	sets := []*gatewayv1.ListenerSet{
		listenerSet("apps", "b", time.Minute, listener("x", 8080, "b.example")),
		listenerSet("apps", "a", 0, listener("x", 8080, "a.example"), listener("y", 80, "gw.example")),
	}
	c := ComposeGateway(gw, sets, nil)
	v, err := c.ListenerSetListeners()
	if err != nil {
		t.Fatal(err)
	}
	served := gw.DeepCopy()
	served.Annotations = map[string]string{ListenerSetListenersAnnotation: v}
	got, err := WithListenerSetListeners(served)
	if err != nil {
		t.Fatal(err)
	}
	names := func(g *gatewayv1.Gateway) string {
		var s []string
		for _, l := range g.Spec.Listeners {
			s = append(s, fmt.Sprintf("%s:%d:%s", l.Name, l.Port, listenerHost(&l)))
		}
		return strings.Join(s, ",")
	}
	if want := "http:80:gw.example,apps/a/x:8080:a.example,apps/b/x:8080:b.example"; names(got) != want || names(c.Gateway) != want {
		t.Errorf("composed %s, from the annotation %s, want %s", names(c.Gateway), names(got), want)
	}
	// A Gateway that admits ListenerSets no more serves none of them.
	closed := served.DeepCopy()
	closed.Spec.AllowedListeners = nil
	if got, err := WithListenerSetListeners(closed); err != nil || names(got) != "http:80:gw.example" {
		t.Errorf("allowedListeners removed: %v, %s", err, names(got))
	}
	// No annotation: the Gateway itself.
	if got, err := WithListenerSetListeners(gw); err != nil || got != gw {
		t.Errorf("no annotation: %v", err)
	}
	for name, bad := range map[string]string{
		"not JSON":       "{",
		"unknown field":  `[{"name":"apps/a/x","port":8080,"protocol":"HTTP","bogus":1}]`,
		"not a key":      `[{"name":"x","port":8080,"protocol":"HTTP"}]`,
		"TCP":            `[{"name":"apps/a/x","port":8443,"protocol":"TCP"}]`,
		"HTTPS sans tls": `[{"name":"apps/a/x","port":8443,"protocol":"HTTPS"}]`,
		"HTTP with tls":  `[{"name":"apps/a/x","port":8080,"protocol":"HTTP","tls":{"certificateRefs":[{"name":"c"}]}}]`,
		"bad port":       `[{"name":"apps/a/x","port":0,"protocol":"HTTP"}]`,
	} {
		g := gw.DeepCopy()
		g.Annotations = map[string]string{ListenerSetListenersAnnotation: bad}
		if _, err := WithListenerSetListeners(g); err == nil || !strings.Contains(err.Error(), ListenerSetListenersAnnotation) {
			t.Errorf("%s: got %v, want an error naming the annotation", name, err)
		}
	}
}

// TestComposeGatewayHTTPS: the HTTPS listeners of a ListenerSet are
// served when their certificateRefs are permitted: a
// Secret in the ListenerSet's namespace (a ref without namespace is
// there, not in the Gateway's) or one that a ReferenceGrant from kind
// ListenerSet lets it reference; a grant from Gateways does not do.
func TestComposeGatewayHTTPS(t *testing.T) {
	fromLS := func(ns string) gatewayv1.ReferenceGrantFrom {
		return gatewayv1.ReferenceGrantFrom{Group: gatewayv1.GroupName, Kind: "ListenerSet", Namespace: gatewayv1.Namespace(ns)}
	}
	secrets := func(ns string, from gatewayv1.ReferenceGrantFrom) *gatewayv1.ReferenceGrant {
		return &gatewayv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"},
			Spec: gatewayv1.ReferenceGrantSpec{From: []gatewayv1.ReferenceGrantFrom{from}, To: []gatewayv1.ReferenceGrantTo{{Kind: "Secret"}}}}
	}
	inCerts := gatewayv1.SecretObjectReference{Name: "shared", Namespace: ptr(gatewayv1.Namespace("certs"))}
	gw := allowListeners(gateway(listener("http", 80, "")), gatewayv1.NamespacesFromAll, nil)
	set := listenerSet("apps", "ls", 0,
		httpsListener("own", 443, "own.example", gatewayv1.SecretObjectReference{Name: "own-cert"}),
		httpsListener("shared", 443, "shared.example", inCerts),
		listener("plain", 8080, ""))
	tests := []struct {
		name    string
		objs    *Objects
		want    string // ListenerSet and listeners' Accepted, then each listener's ResolvedRefs
		secrets []string
	}{
		{
			name:    "no grant",
			objs:    &Objects{},
			want:    "ls=Accepted own:Accepted shared:Accepted plain:Accepted; refs ResolvedRefs !RefNotPermitted ResolvedRefs",
			secrets: []string{"apps/own-cert"},
		},
		{
			name:    "a grant from Gateways does not do",
			objs:    &Objects{ReferenceGrants: []*gatewayv1.ReferenceGrant{secrets("certs", gatewayv1.ReferenceGrantFrom{Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: "apps"})}},
			want:    "ls=Accepted own:Accepted shared:Accepted plain:Accepted; refs ResolvedRefs !RefNotPermitted ResolvedRefs",
			secrets: []string{"apps/own-cert"},
		},
		{
			name:    "a grant from ListenerSets of another namespace does not do",
			objs:    &Objects{ReferenceGrants: []*gatewayv1.ReferenceGrant{secrets("certs", fromLS("infra"))}},
			want:    "ls=Accepted own:Accepted shared:Accepted plain:Accepted; refs ResolvedRefs !RefNotPermitted ResolvedRefs",
			secrets: []string{"apps/own-cert"},
		},
		{
			name:    "granted",
			objs:    &Objects{ReferenceGrants: []*gatewayv1.ReferenceGrant{secrets("certs", fromLS("apps"))}},
			want:    "ls=Accepted own:Accepted shared:Accepted plain:Accepted; refs ResolvedRefs ResolvedRefs ResolvedRefs",
			secrets: []string{"apps/own-cert", "certs/shared"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ComposeGateway(gw, []*gatewayv1.ListenerSet{set}, tt.objs)
			got := outcome(c) + "; refs"
			for _, l := range c.ListenerSets[0].Listeners {
				got += " " + condStr(l.Conditions, "ResolvedRefs")
				prog := condStr(l.Conditions, "Programmed")
				if l.Served != (prog == "Programmed") {
					t.Errorf("%s: served %v, Programmed %s", l.Name, l.Served, prog)
				}
			}
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			var secs []string
			for _, r := range CertificateSecrets(c.Gateway) {
				secs = append(secs, r.String())
			}
			if strings.Join(secs, ",") != strings.Join(tt.secrets, ",") {
				t.Errorf("CertificateSecrets %v, want %v", secs, tt.secrets)
			}
			for _, l := range c.Gateway.Spec.Listeners {
				if l.Protocol != gatewayv1.HTTPSProtocolType {
					continue
				}
				for _, r := range l.TLS.CertificateRefs {
					if r.Namespace == nil || *r.Namespace == "" {
						t.Errorf("%s: certificateRef %s without namespace", l.Name, r.Name)
					}
				}
			}
			if set.Spec.Listeners[0].TLS.CertificateRefs[0].Namespace != nil {
				t.Errorf("the input ListenerSet was changed")
			}
			again := ComposeGateway(c.Gateway, []*gatewayv1.ListenerSet{set}, tt.objs)
			if outcome(again) != outcome(c) || len(again.Gateway.Spec.Listeners) != len(c.Gateway.Spec.Listeners) {
				t.Errorf("composing twice: %s", outcome(again))
			}
		})
	}
}

func TestListenerCertificateRefPermitted(t *testing.T) {
	g := func(kind gatewayv1.Kind, ns string) []*gatewayv1.ReferenceGrant {
		return []*gatewayv1.ReferenceGrant{{ObjectMeta: metav1.ObjectMeta{Namespace: "certs", Name: "g"},
			Spec: gatewayv1.ReferenceGrantSpec{
				From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: kind, Namespace: gatewayv1.Namespace(ns)}},
				To:   []gatewayv1.ReferenceGrantTo{{Kind: "Secret"}},
			}}}
	}
	gw := gateway()
	own, lsKey := "https", ListenerSetListenerKey("apps", "ls", "https")
	tests := []struct {
		name     string
		grants   []*gatewayv1.ReferenceGrant
		listener string
		secretNS string
		want     bool
	}{
		{"Gateway listener, own namespace", nil, own, gw.Namespace, true},
		{"Gateway listener, Gateway grant", g("Gateway", gw.Namespace), own, "certs", true},
		{"Gateway listener, ListenerSet grant", g("ListenerSet", gw.Namespace), own, "certs", false},
		{"ListenerSet listener, its namespace", nil, lsKey, "apps", true},
		{"ListenerSet listener, the Gateway's namespace", nil, lsKey, gw.Namespace, false},
		{"ListenerSet listener, ListenerSet grant", g("ListenerSet", "apps"), lsKey, "certs", true},
		{"ListenerSet listener, grant to another namespace's ListenerSets", g("ListenerSet", gw.Namespace), lsKey, "certs", false},
		{"ListenerSet listener, Gateway grant", g("Gateway", "apps"), lsKey, "certs", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ListenerCertificateRefPermitted(tt.grants, gw, tt.listener, tt.secretNS, "www"); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestListenerSetListenersAnnotationHTTPS: the HTTPS listeners of
// ListenerSets go through the annotation with their certificateRefs'
// namespaces, so that the chaperone reads the Secrets of the
// ListenerSet's namespace (or the one a ReferenceGrant opened).
func TestListenerSetListenersAnnotationHTTPS(t *testing.T) {
	gw := allowListeners(gateway(listener("http", 80, "")), gatewayv1.NamespacesFromAll, nil)
	sets := []*gatewayv1.ListenerSet{listenerSet("apps", "a", 0,
		httpsListener("own", 443, "own.example", gatewayv1.SecretObjectReference{Name: "own-cert"}),
		httpsListener("shared", 443, "shared.example", gatewayv1.SecretObjectReference{Name: "shared", Namespace: ptr(gatewayv1.Namespace("certs"))}))}
	grant := &gatewayv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "certs", Name: "g"}, Spec: gatewayv1.ReferenceGrantSpec{
		From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "ListenerSet", Namespace: "apps"}},
		To:   []gatewayv1.ReferenceGrantTo{{Kind: "Secret"}},
	}}
	c := ComposeGateway(gw, sets, &Objects{ReferenceGrants: []*gatewayv1.ReferenceGrant{grant}})
	v, err := c.ListenerSetListeners()
	if err != nil {
		t.Fatal(err)
	}
	served := gw.DeepCopy()
	served.Annotations = map[string]string{ListenerSetListenersAnnotation: v}
	got, err := WithListenerSetListeners(served)
	if err != nil {
		t.Fatal(err)
	}
	var names, secrets []string
	for _, l := range got.Spec.Listeners {
		names = append(names, fmt.Sprintf("%s:%d:%s", l.Name, l.Port, l.Protocol))
	}
	for _, r := range CertificateSecrets(got) {
		secrets = append(secrets, r.String())
	}
	if want := "http:80:HTTP,apps/a/own:443:HTTPS,apps/a/shared:443:HTTPS"; strings.Join(names, ",") != want {
		t.Errorf("listeners %v, want %s", names, want)
	}
	if want := "apps/own-cert,certs/shared"; strings.Join(secrets, ",") != want {
		t.Errorf("CertificateSecrets %v, want %s", secrets, want)
	}
	for _, l := range got.Spec.Listeners[1:] {
		if !ListenerCertificateRefPermitted([]*gatewayv1.ReferenceGrant{grant}, got, string(l.Name), string(*l.TLS.CertificateRefs[0].Namespace), string(l.TLS.CertificateRefs[0].Name)) {
			t.Errorf("%s: the ReferenceGrant from ListenerSets of apps does not permit its certificate", l.Name)
		}
	}
}

// TestListenerSetGenerationsAnnotation: the generations annotation names
// the ListenerSets with a served listener, with the generation they were
// composed from, and decodes back; bad values are errors naming it.
func TestListenerSetGenerationsAnnotation(t *testing.T) {
	gw := allowListeners(gateway(listener("http", 80, "gw.example")), gatewayv1.NamespacesFromAll, nil)
	a := listenerSet("apps", "a", 0, listener("x", 8080, "a.example"))
	a.Generation = 3
	// Its only listener conflicts with the Gateway's: nothing served.
	b := listenerSet("apps", "b", time.Minute, listener("y", 80, "gw.example"))
	b.Generation = 7
	c := ComposeGateway(gw, []*gatewayv1.ListenerSet{a, b}, nil)
	v, err := c.ListenerSetGenerations()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"apps/a":3}`; v != want {
		t.Errorf("annotation %s, want %s", v, want)
	}
	g := gw.DeepCopy()
	g.Annotations = map[string]string{ListenerSetGenerationsAnnotation: v}
	got, err := ListenerSetGenerations(g)
	if err != nil || len(got) != 1 || got[object.Ref{Namespace: "apps", Name: "a"}] != 3 {
		t.Errorf("decoded %v, %v", got, err)
	}
	if v, err := ComposeGateway(gw, nil, nil).ListenerSetGenerations(); v != "" || err != nil {
		t.Errorf("no ListenerSets: %q, %v", v, err)
	}
	if got, err := ListenerSetGenerations(gw); got != nil || err != nil {
		t.Errorf("no annotation: %v, %v", got, err)
	}
	for name, bad := range map[string]string{
		"not JSON":      "{",
		"not an object": `[1]`,
		"not ns/name":   `{"a":1}`,
		"three parts":   `{"a/b/c":1}`,
		"generation 0":  `{"apps/a":0}`,
		"not a number":  `{"apps/a":"1"}`,
		"empty name":    `{"apps/":1}`,
		"empty namesp.": `{"/a":1}`,
	} {
		g := gw.DeepCopy()
		g.Annotations = map[string]string{ListenerSetGenerationsAnnotation: bad}
		if _, err := ListenerSetGenerations(g); err == nil || !strings.Contains(err.Error(), ListenerSetGenerationsAnnotation) {
			t.Errorf("%s: got %v, want an error naming the annotation", name, err)
		}
	}
}
