package routing

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

// sessionGhost serves the ghost.json of one route on gw through a real
// varnishd and ghost, and reloads it when the route changes.
type sessionGhost struct {
	gw          *gatewayv1.Gateway
	objs        *Objects
	path, admin string
	listen      string
}

func (g *sessionGhost) write(t *testing.T, r *gatewayv1.HTTPRoute) {
	t.Helper()
	if errs := ValidateHTTPRoute(r); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	f, err := Attach(g.gw, r, g.objs)
	if err != nil || !f.Accepted() {
		t.Fatalf("attach: %v %+v", err, f)
	}
	tb, err := Merge(g.gw, []*Fragment{f})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Resolve(tb, g.objs)
	if err != nil {
		t.Fatal(err)
	}
	data, err := ghostjson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g.path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (g *sessionGhost) reload(t *testing.T, r *gatewayv1.HTTPRoute) {
	t.Helper()
	g.write(t, r)
	resp, err := http.Post("http://"+g.admin+"/.varnish-ghost/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"status":"ok"`) {
		t.Fatalf("reload: %d %s", resp.StatusCode, body)
	}
}

// TestSessionPersistenceThroughGhost takes a rule with session
// persistence and two backends at weights 50/50 through Attach, Merge and
// Resolve to a real varnishd and ghost, with clients that keep cookies as
// a browser does (net/http/cookiejar, Path included): each client stays on
// the backend of its first request for all its requests, both backends get
// clients, the origin never sees the session cookie, a cookie naming no
// endpoint of the rule gets a new session, and when a backendRef is
// removed from the rule its clients get a new session on the other
// backend while the other clients stay.
func TestSessionPersistenceThroughGhost(t *testing.T) {
	objs := &Objects{Services: []*corev1.Service{service("infra", "web-a"), service("infra", "web-b")}}
	echo := startEchoBackends(t, objs)
	gw := gateway(listener("http", 80, ""))
	rule := func(backends ...gatewayv1.HTTPBackendRef) gatewayv1.HTTPRouteRule {
		return gatewayv1.HTTPRouteRule{
			Matches:            []gatewayv1.HTTPRouteMatch{prefix("/cart")},
			BackendRefs:        backends,
			SessionPersistence: &gatewayv1.SessionPersistence{SessionName: ptr("cart")},
		}
	}
	both := route("infra", "shop", rules(rule(backend("", "web-a", 80, ptr(int32(50))), backend("", "web-b", 80, ptr(int32(50))))))

	work := filepath.Join(varnishdtest.Dir(t), "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	g := &sessionGhost{gw: gw, objs: objs, path: filepath.Join(work, "ghost.json"), admin: varnishdtest.FreeAddr(t), listen: varnishdtest.FreeAddr(t)}
	g.write(t, both)
	p := varnishdtest.Start(t, varnishd.Config{
		WorkDir:        work,
		Listeners:      []varnishd.Listener{{Name: ghostjson.SocketName(80), Addr: g.listen}},
		GhostAdminAddr: g.admin,
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Admin.VCLInline(ctx, "main", varnishdtest.MainVCL(varnishdtest.GhostVMOD(t), g.path)); err != nil {
		t.Fatalf("vcl.inline: %v", err)
	}
	if err := p.Admin.VCLUse(ctx, "main"); err != nil {
		t.Fatal(err)
	}

	type result struct {
		service   string
		setCookie []string
	}
	get := func(t *testing.T, c *http.Client, path, cookie string) result {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+g.listen+path, nil)
		req.Host = "shop.example"
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		_, before := echo.last()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		got, after := echo.last()
		if resp.StatusCode != 200 || after != before+1 {
			t.Fatalf("GET %s: status %d, backend requests %d -> %d", path, resp.StatusCode, before, after)
		}
		if v := got.header.Values("Cookie"); strings.Contains(strings.Join(v, ";"), "cart=") {
			t.Fatalf("GET %s: the origin got the session cookie: %q", path, v)
		}
		return result{got.service, resp.Header.Values("Set-Cookie")}
	}
	client := func(t *testing.T) *http.Client {
		jar, err := cookiejar.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Client{Timeout: 10 * time.Second, Jar: jar}
	}

	// 30 clients of 10 requests each
	sessions := map[string][]*http.Client{}
	for i := range 30 {
		c := client(t)
		first := get(t, c, fmt.Sprintf("/cart/%d", i), "")
		if len(first.setCookie) != 1 || !strings.HasPrefix(first.setCookie[0], "cart=") || !strings.Contains(first.setCookie[0], "; Path=/cart;") {
			t.Fatalf("client %d: first response Set-Cookie %q, want one cart cookie with Path=/cart", i, first.setCookie)
		}
		for j := range 9 {
			r := get(t, c, fmt.Sprintf("/cart/%d/%d", i, j), "")
			if r.service != first.service {
				t.Fatalf("client %d request %d: served by %s, its session is on %s", i, j+2, r.service, first.service)
			}
			if len(r.setCookie) != 0 {
				t.Fatalf("client %d request %d: a kept session got Set-Cookie %q", i, j+2, r.setCookie)
			}
		}
		sessions[first.service] = append(sessions[first.service], c)
	}
	if len(sessions["web-a"]) == 0 || len(sessions["web-b"]) == 0 {
		t.Fatalf("30 sessions at weights 50/50: %d on web-a, %d on web-b, want both", len(sessions["web-a"]), len(sessions["web-b"]))
	}
	t.Logf("30 sessions of 10 requests through %s and ghost: %d on web-a, %d on web-b", varnishdtest.Bin(t), len(sessions["web-a"]), len(sessions["web-b"]))

	// a cookie that names no endpoint of the rule: a new session
	for _, bad := range []string{"cart=0123456789abcdef.1", "cart=garbage", "cart=" + strings.Repeat("f", 16) + ".99999999999"} {
		if r := get(t, client(t), "/cart/x", "a=1; "+bad); len(r.setCookie) != 1 || !strings.HasPrefix(r.setCookie[0], "cart=") {
			t.Errorf("Cookie %q: Set-Cookie %q, want a new session", bad, r.setCookie)
		}
	}

	// web-b's backendRef removed from the rule: its clients get a new
	// session on web-a, web-a's keep theirs
	g.reload(t, route("infra", "shop", rules(rule(backend("", "web-a", 80, ptr(int32(50)))))))
	for _, c := range sessions["web-b"] {
		r := get(t, c, "/cart/after", "")
		if r.service != "web-a" || len(r.setCookie) != 1 {
			t.Fatalf("a web-b session after web-b left the rule: served by %s, Set-Cookie %q; want web-a and a new cookie", r.service, r.setCookie)
		}
		if r := get(t, c, "/cart/after", ""); r.service != "web-a" || len(r.setCookie) != 0 {
			t.Fatalf("the new session: served by %s, Set-Cookie %q", r.service, r.setCookie)
		}
	}
	for _, c := range sessions["web-a"] {
		if r := get(t, c, "/cart/after", ""); r.service != "web-a" || len(r.setCookie) != 0 {
			t.Fatalf("a web-a session after the reload: served by %s, Set-Cookie %q; want it kept", r.service, r.setCookie)
		}
	}
}
