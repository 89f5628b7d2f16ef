package conformance

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/mainvcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routingfragment"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/retrysim"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// suiteManifests are the objects of one manifest file of the suite. The
// suite's Deployments and ConfigMaps (its echo server) are replaced by
// echoServers; any other kind is listed in Unknown.
type suiteManifests struct {
	Namespaces []*corev1.Namespace
	Services   []*corev1.Service
	Gateways   []*gatewayv1.Gateway
	Grants     []*gatewayv1.ReferenceGrant
	Routes     []*gatewayv1.HTTPRoute
	Slices     []*discoveryv1.EndpointSlice // filled by the test in code (suiteSetups)
	Unknown    []string
}

var suiteDocSep = regexp.MustCompile(`(?m)^---\s*$`)

// readSuiteManifests decodes a manifest file of the suite strictly; the
// GatewayClass placeholder becomes "varnishgw".
func readSuiteManifests(path string) (*suiteManifests, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	data = bytes.ReplaceAll(data, []byte("{GATEWAY_CLASS_NAME}"), []byte("varnishgw"))
	m := &suiteManifests{}
	for i, doc := range suiteDocSep.Split(string(data), -1) {
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("%s document %d: %w", filepath.Base(path), i, err)
		}
		var head struct{ APIVersion, Kind string }
		if err := json.Unmarshal(js, &head); err != nil || head.Kind == "" {
			continue
		}
		var v any
		switch head.APIVersion + " " + head.Kind {
		case "v1 Namespace":
			o := &corev1.Namespace{}
			m.Namespaces, v = append(m.Namespaces, o), o
		case "v1 Service":
			o := &corev1.Service{}
			m.Services, v = append(m.Services, o), o
		case "gateway.networking.k8s.io/v1 Gateway":
			o := &gatewayv1.Gateway{}
			m.Gateways, v = append(m.Gateways, o), o
		case "gateway.networking.k8s.io/v1beta1 ReferenceGrant", "gateway.networking.k8s.io/v1 ReferenceGrant":
			o := &gatewayv1.ReferenceGrant{}
			m.Grants, v = append(m.Grants, o), o
		case "gateway.networking.k8s.io/v1 HTTPRoute":
			o := &gatewayv1.HTTPRoute{}
			m.Routes, v = append(m.Routes, o), o
		case "discovery.k8s.io/v1 EndpointSlice":
			o := &discoveryv1.EndpointSlice{}
			m.Slices, v = append(m.Slices, o), o
		case "apps/v1 Deployment", "v1 ConfigMap":
			continue // the echo server: replaced by echoServers
		default:
			m.Unknown = append(m.Unknown, head.APIVersion+" "+head.Kind)
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return nil, fmt.Errorf("%s document %d (%s): %w", filepath.Base(path), i, head.Kind, err)
		}
	}
	return m, nil
}

// echoServers imitate the suite's echo backend: the pods of each selector
// (each Service without one) are one HTTP server, which an EndpointSlice
// per Service names for every port. It answers with the request as JSON
// (path with query, host, method, headers, namespace, pod), sleeps for
// ?delay=, sets the response headers X-Echo-Set-Header names
// ("name:value,..."), echoes WebSocket messages, runs the retry
// simulation under /retry/ (retrysim: per ?uuid=, the first
// ?succeedAfter= requests fail with ?responseCode=, then the JSON answer)
// and counts what it got.
type echoServers struct {
	t  *testing.T
	ip string

	mu      sync.Mutex
	got     map[string][]string    // pod -> request paths, in order
	servers map[string]echoAddress // namespace/selector -> the echo server of those pods
}

// echoAddress is one echo server: its port and the pod name it answers with.
type echoAddress struct {
	port int32
	pod  string
}

type echoBody struct {
	Path      string              `json:"path"`
	Host      string              `json:"host"`
	Method    string              `json:"method"`
	Headers   map[string][]string `json:"headers"`
	Namespace string              `json:"namespace"`
	Pod       string              `json:"pod"`
}

// serve starts svc's echo server and returns its EndpointSlice. A Service
// whose selector an earlier Service has selects the same pods: the same
// echo server.
func (e *echoServers) serve(svc *corev1.Service) *discoveryv1.EndpointSlice {
	sel := svc.Namespace + "/" + labels.SelectorFromSet(svc.Spec.Selector).String()
	addr, ok := e.servers[sel]
	if !ok || len(svc.Spec.Selector) == 0 {
		addr = e.start(svc.Namespace, svc.Name+"-replay")
		if len(svc.Spec.Selector) > 0 {
			e.servers[sel] = addr
		}
	}
	return e.slice(svc, addr)
}

// start starts an echo server answering as pod of namespace.
func (e *echoServers) start(namespace, pod string) echoAddress {
	l, err := net.Listen("tcp", net.JoinHostPort(e.ip, "0"))
	if err != nil {
		e.t.Fatal(err)
	}
	retry := retrysim.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { echoAnswer(w, r, namespace, pod) }))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.got[pod] = append(e.got[pod], r.URL.Path)
		e.mu.Unlock()
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			wsEcho.ServeHTTP(w, r)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/retry/") {
			retry.ServeHTTP(w, r)
			return
		}
		echoAnswer(w, r, namespace, pod)
	})}
	go srv.Serve(l)
	e.t.Cleanup(func() { srv.Close() })
	return echoAddress{port: int32(l.Addr().(*net.TCPAddr).Port), pod: pod}
}

// echoAnswer is the echo backend's answer to r, as pod of namespace.
func echoAnswer(w http.ResponseWriter, r *http.Request, namespace, pod string) {
	if d, err := time.ParseDuration(r.URL.Query().Get("delay")); err == nil {
		time.Sleep(d)
	}
	if set := r.Header.Get("X-Echo-Set-Header"); set != "" {
		for _, kv := range strings.Split(set, ",") {
			if k, v, ok := strings.Cut(kv, ":"); ok {
				w.Header().Set(k, v)
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(echoBody{ // a client that left gets nothing
		Path: r.RequestURI, Host: r.Host, Method: r.Method, Headers: r.Header,
		Namespace: namespace, Pod: pod,
	})
}

// wsEcho answers a WebSocket upgrade as the suite's echo backend does:
// each message comes back as it came, text or binary.
var wsEcho = websocket.Server{Handler: func(c *websocket.Conn) {
	for {
		var payload []byte
		var frameType byte
		frame := websocket.Codec{
			Marshal: func(any) ([]byte, byte, error) { return payload, frameType, nil },
			Unmarshal: func(data []byte, typ byte, _ any) error {
				payload, frameType = data, typ
				return nil
			},
		}
		if err := frame.Receive(c, nil); err != nil {
			return
		}
		if err := frame.Send(c, nil); err != nil {
			return
		}
	}
}}

// slice is svc's EndpointSlice naming the echo server addr on every port.
func (e *echoServers) slice(svc *corev1.Service, addr echoAddress) *discoveryv1.EndpointSlice {
	port := addr.port
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name + "-replay", Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
	}
	for _, p := range svc.Spec.Ports {
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: ptr(p.Name), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP), AppProtocol: p.AppProtocol})
	}
	return es
}

// count is the number of requests the pods of Service svc (namespace/name)
// got for path.
func (e *echoServers) count(svc, path string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, name, _ := strings.Cut(svc, "/")
	n := 0
	for _, p := range e.got[name+"-replay"] {
		if p == path {
			n++
		}
	}
	return n
}

// replayGateway is a Gateway of the suite served by a chaperone binary
// (--routing=kubernetes) on its own loopback address, at the listener
// ports of the manifest.
type replayGateway struct {
	gw    *gatewayv1.Gateway
	ip    string
	ports []int32
	https map[int32]bool // the ports of HTTPS listeners (hitch in front)
	c     *chaperonetest.Chaperone
	pod   string
	frags []string // the fragments of the current scenario
}

// replay is the state shared by the scenarios: the control plane, the
// suite's base objects and the chaperones of the base Gateways.
type replay struct {
	t    *testing.T
	cp   *testenv.ControlPlane
	dyn  dynamic.Interface
	dir  string
	base *suiteManifests
	echo *echoServers
	gws  map[string]*replayGateway // the base Gateways' chaperones, started on first use
}

func (r *replay) ensureNamespace(t *testing.T, ns *corev1.Namespace) {
	t.Helper()
	_, err := r.cp.Client.CoreV1().Namespaces().Create(context.Background(), ns.DeepCopy(), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// createService creates svc and its echo server's EndpointSlice (none for
// a Service without selector whose slices the manifest holds: manual); the
// scenario's Services are deleted when t ends.
func (r *replay) createService(t *testing.T, svc *corev1.Service, scenario, manual bool) {
	t.Helper()
	ctx := context.Background()
	r.ensureNamespace(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: svc.Namespace}})
	s := svc.DeepCopy()
	s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
	if s.Spec.Type == corev1.ServiceTypeClusterIP || s.Spec.Type == "" {
		if svc.Spec.ClusterIP == corev1.ClusterIPNone {
			s.Spec.ClusterIP = corev1.ClusterIPNone
		}
	}
	if _, err := r.cp.Client.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Service %s/%s: %v", s.Namespace, s.Name, err)
	}
	if scenario {
		cleanupDelete(t, "Service "+s.Name, func() error {
			return r.cp.Client.CoreV1().Services(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
		})
	}
	if len(svc.Spec.Selector) == 0 && manual {
		return // the manifest's EndpointSlices, which the test fills
	}
	r.createSlice(t, r.echo.serve(svc), scenario)
}

// createSlice creates es; a scenario's is deleted when t ends.
func (r *replay) createSlice(t *testing.T, es *discoveryv1.EndpointSlice, scenario bool) {
	t.Helper()
	ctx := context.Background()
	es, err := r.cp.Client.DiscoveryV1().EndpointSlices(es.Namespace).Create(ctx, es, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if scenario {
		cleanupDelete(t, "EndpointSlice "+es.Name, func() error {
			return r.cp.Client.DiscoveryV1().EndpointSlices(es.Namespace).Delete(ctx, es.Name, metav1.DeleteOptions{})
		})
	}
}

// startGateway creates gw in the API server and runs a chaperone for it,
// as the Gateway's ServiceAccount with the documented RBAC, listening on
// the listener ports on a loopback address of its own. The chaperone
// stops when t ends.
func (r *replay) startGateway(t *testing.T, gw *gatewayv1.Gateway, namespaces []string) *replayGateway {
	t.Helper()
	ctx := context.Background()
	g := &replayGateway{gw: gw, pod: "replay-" + gw.Name, https: map[int32]bool{}}
	var certs []string
	for _, l := range gw.Spec.Listeners {
		if !slices.Contains(g.ports, int32(l.Port)) {
			g.ports = append(g.ports, int32(l.Port))
		}
		if l.Protocol == gatewayv1.HTTPSProtocolType {
			g.https[int32(l.Port)] = true
			for _, ref := range l.TLS.CertificateRefs {
				if !slices.Contains(certs, string(ref.Name)) {
					certs = append(certs, string(ref.Name))
				}
			}
		}
	}
	// A loopback address of its own: the listener ports are the
	// manifest's (80, 8080, ...), as redirects and Host headers name them.
	for try := 0; ; try++ {
		g.ip = fmt.Sprintf("127.%d.%d.%d", 100+rand.IntN(100), rand.IntN(256), 1+rand.IntN(254))
		free := true
		for _, p := range g.ports {
			l, err := net.Listen("tcp", net.JoinHostPort(g.ip, strconv.Itoa(int(p))))
			if err != nil {
				free = false
				if try > 10 {
					t.Fatalf("listen on %s:%d for Gateway %s: %v (the replay binds the manifest's ports, 80 among them: run as root)", g.ip, p, gw.Name, err)
				}
				break
			}
			l.Close()
		}
		if free {
			break
		}
	}
	created, err := r.cp.Gateway.GatewayV1().Gateways(gw.Namespace).Create(ctx, gw.DeepCopy(), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Gateway %s/%s: %v", gw.Namespace, gw.Name, err)
	}
	cleanupDelete(t, "Gateway "+gw.Name, func() error {
		return r.cp.Gateway.GatewayV1().Gateways(gw.Namespace).Delete(ctx, created.Name, metav1.DeleteOptions{})
	})
	ref := object.Ref{Namespace: gw.Namespace, Name: gw.Name}
	sa := "replay-" + gw.Name
	r.cp.GrantRole(t, gw.Namespace, sa+"-gateway", gw.Namespace, sa, gwruntime.GatewayRules(ref))
	for _, ns := range namespaces {
		r.cp.GrantRole(t, ns, sa+"-backends", gw.Namespace, sa, gwruntime.BackendRules())
	}
	if len(certs) > 0 {
		// The suite creates its certificates in code: one self-signed
		// certificate per Secret the HTTPS listeners name (the replay
		// checks routing; the chaperone's certificate handling has its
		// own tests).
		r.cp.GrantRole(t, gw.Namespace, sa+"-certificates", gw.Namespace, sa, []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: certs, Verbs: []string{"get", "list", "watch"}},
		})
		for _, name := range certs {
			secret, _ := chaperonetest.TLSSecret(t, "demo", name, "example.org", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
			secret.Namespace = gw.Namespace
			if _, err := r.cp.Client.CoreV1().Secrets(gw.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	kubeconfig, err := r.cp.ServiceAccountKubeconfig(ctx, gw.Namespace, sa)
	if err != nil {
		t.Fatal(err)
	}
	dir := varnishdtest.Dir(t)
	cm, err := r.cp.Client.CoreV1().ConfigMaps(gw.Namespace).Create(ctx, providerVCL(t, r.cp, created, mainvcl.Render(mainvcl.Options{GhostJSON: filepath.Join(dir, "ghost.json"), VMOD: build.GhostVMOD})), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupDelete(t, "ConfigMap "+cm.Name, func() error {
		return r.cp.Client.CoreV1().ConfigMaps(cm.Namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{})
	})
	args := []string{"--routing=kubernetes", "--gateway=" + gw.Namespace + "/" + gw.Name, "--vcl=", "--kubeconfig=" + kubeconfig,
		"--pod-name=" + g.pod, "--listen-host", g.ip, "--log-level", "info"}
	for _, p := range g.ports {
		if g.https[p] {
			args = append(args, "--tls-listen", strconv.Itoa(int(p)))
		} else {
			args = append(args, "--listen", strconv.Itoa(int(p)))
		}
	}
	if len(g.https) > 0 {
		args = append(args, "--tls-dir", filepath.Join(dir, "tls"), "--hitch", "/usr/sbin/hitch")
	}
	g.c = chaperonetest.Launch(t, build, dir, chaperonetest.Backend(t, "boot"), "", args...)
	g.c.WaitFor("ready", 90*time.Second, func() bool { code, _ := g.c.Health("/readyz"); return code == 200 })
	return g
}

// serveFragments replaces g's RoutingFragments with those of routes
// (Attach, as the provider writes them) and waits until the chaperone
// reports that it serves them.
func (r *replay) serveFragments(t *testing.T, g *replayGateway, routes []*gatewayv1.HTTPRoute, objs *routing.Objects) error {
	t.Helper()
	ctx := context.Background()
	frags := r.dyn.Resource(vgwapi.RoutingFragments).Namespace(g.gw.Namespace)
	for _, name := range g.frags {
		if err := frags.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	g.frags = nil
	var lastName, lastRV string
	for _, route := range routes {
		f, err := routing.Attach(g.gw, route, objs)
		if err != nil || !f.Accepted() {
			continue // not a parent, or not accepted: the provider writes no fragment
		}
		obj, err := routingfragment.New(f)
		if err != nil {
			return fmt.Errorf("route %s/%s: %w", route.Namespace, route.Name, err)
		}
		obj, err = frags.Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create the fragment of route %s/%s: %w", route.Namespace, route.Name, err)
		}
		g.frags = append(g.frags, obj.GetName())
		lastName, lastRV = obj.GetName(), obj.GetResourceVersion()
	}
	ref := object.Ref{Namespace: g.gw.Namespace, Name: g.gw.Name}
	deadline := time.Now().Add(60 * time.Second)
	for {
		reports, err := vgwapi.ReadReports(ctx, r.dyn, ref)
		if err == nil {
			rep := reports[g.pod]
			if rep != nil && rep.Status.Routing != nil && rep.Status.Routing.Fragments == len(g.frags) {
				if len(g.frags) == 0 {
					return nil
				}
				served, rej := rep.Served(lastName, lastRV)
				if rej != nil {
					return fmt.Errorf("the chaperone rejected fragment %s: %s", rej.Name, rej.Reason)
				}
				if served {
					if len(rep.Status.Routing.Rejected) > 0 {
						return fmt.Errorf("the chaperone rejected fragments: %+v", rep.Status.Routing.Rejected)
					}
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the chaperone of Gateway %s did not report serving %d fragments within 60 s", g.gw.Name, len(g.frags))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// replayClient sends the suite's requests; it never follows redirects
// (the cases check them).
var replayClient = &http.Client{
	Timeout:       15 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport:     &http.Transport{DisableKeepAlives: true},
}

// caseResponse is what one request got.
type caseResponse struct {
	status  int
	header  http.Header
	echo    echoBody
	isEcho  bool
	request *http.Request
}

// send sends c's request to the listener of g whose port the Host header
// names, else to the first listener, as the suite does.
func (g *replayGateway) send(c suiteCase) (*caseResponse, error) {
	h2 := c.Request.Protocol == "H2" // roundtripper.H2Protocol: HTTP/2 over TLS
	if c.Request.Protocol != "" && !h2 {
		return nil, fmt.Errorf("%s: protocol %s is not replayed", c.Pos, c.Request.Protocol)
	}
	// The suite's Gateway address has the port of the listener the test
	// names (gwAddr8080, ...), else of the first listener; a port in the
	// Host header picks that listener.
	port := g.ports[0]
	if slices.Contains(g.ports, c.Port) {
		port = c.Port
	}
	if _, p, ok := strings.Cut(c.Request.Host, ":"); ok {
		if n, err := strconv.Atoi(p); err == nil && slices.Contains(g.ports, int32(n)) {
			port = int32(n)
		}
	}
	if !slices.Contains(g.ports, port) {
		return nil, fmt.Errorf("%s: Gateway %s has no listener on port %d", c.Pos, g.gw.Name, port)
	}
	addr := net.JoinHostPort(g.ip, strconv.Itoa(int(port)))
	scheme, client := "http", replayClient
	if h2 && !g.https[port] {
		return nil, fmt.Errorf("%s: HTTP/2 over TLS to port %d, which is not an HTTPS listener of Gateway %s", c.Pos, port, g.gw.Name)
	}
	if g.https[port] {
		// TLS with the server name (SNI) the test's MakeTLSRequest call
		// passes, else the Host's name. For HTTP/2 (the suite's
		// http2.Transport) only h2 is offered, and the Host is the
		// request's :authority on that connection.
		serverName, _, _ := strings.Cut(c.Request.Host, ":")
		if c.ServerName != "" {
			serverName = c.ServerName
		}
		tc := &tls.Config{ServerName: serverName, InsecureSkipVerify: true} //nolint:gosec // the replay checks routing, not the self-signed certificate
		if h2 {
			tc.NextProtos = []string{"h2"}
		}
		scheme, client = "https", &http.Client{
			Timeout:       replayClient.Timeout,
			CheckRedirect: replayClient.CheckRedirect,
			Transport:     &http.Transport{DisableKeepAlives: true, ForceAttemptHTTP2: h2, TLSClientConfig: tc},
		}
	}
	method := c.Request.Method
	if method == "" {
		method = "GET"
	}
	req, err := http.NewRequest(method, scheme+"://"+addr+c.Request.Path, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Pos, err)
	}
	if c.Request.Host != "" {
		req.Host = c.Request.Host
	}
	for k, v := range c.Request.Headers {
		req.Header.Set(k, v)
	}
	if len(c.BackendSetResponseHeaders) > 0 {
		var set []string
		for k, v := range c.BackendSetResponseHeaders {
			set = append(set, k+":"+v)
		}
		slices.Sort(set)
		req.Header.Set("X-Echo-Set-Header", strings.Join(set, ","))
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s (Host %s): %w", method, c.Request.Path, req.Host, err)
	}
	defer resp.Body.Close()
	if h2 && resp.ProtoMajor != 2 {
		return nil, fmt.Errorf("%s: the response came over %s, want HTTP/2", c.Pos, resp.Proto)
	}
	body, _ := io.ReadAll(resp.Body)
	out := &caseResponse{status: resp.StatusCode, header: resp.Header, request: req}
	if resp.Header.Get("Content-Type") == "application/json" {
		if err := json.Unmarshal(body, &out.echo); err != nil {
			return nil, fmt.Errorf("%s: the echo body: %w", c.Pos, err)
		}
		out.isEcho = true
	} else {
		out.echo.Method = method // not an echo: the gateway answered
	}
	return out, nil
}

func isTimeoutStatus(code int) bool {
	return code == http.StatusGatewayTimeout || code == http.StatusRequestTimeout
}

// check compares a response with c's expectations, with the suite's
// semantics (utils/http CompareRoundTrip): the status among the expected
// ones (200 when none); for 200 and 204 the request the echo backend got
// (path, host, method, namespace, headers present and absent), the
// response's headers and the backend's pod; for redirects the Location's
// scheme, host, port and path.
func check(c suiteCase, got *caseResponse) error {
	codes := slices.Clone(c.Response.StatusCodes)
	if c.Response.StatusCode != 0 {
		codes = append(codes, c.Response.StatusCode)
	}
	if len(codes) == 0 {
		codes = []int{200}
	}
	if isTimeoutStatus(got.status) && slices.ContainsFunc(codes, isTimeoutStatus) {
		return nil
	}
	if !slices.Contains(codes, got.status) {
		return fmt.Errorf("status %d, want one of %v", got.status, codes)
	}
	lower := func(h map[string][]string) map[string][]string {
		out := map[string][]string{}
		for k, v := range h {
			out[strings.ToLower(k)] = v
		}
		return out
	}
	switch {
	case got.status == 200 || got.status == 204:
		want := suiteExpectedRequest{Request: c.Request}
		if c.ExpectedRequest != nil {
			want = *c.ExpectedRequest
		}
		if want.Request.Method == "" {
			want.Request.Method = "GET"
		}
		e := got.echo
		if want.Request.Host != "" && want.Request.Host != e.Host {
			return fmt.Errorf("backend got host %q, want %q", e.Host, want.Request.Host)
		}
		if want.Request.Path != e.Path {
			return fmt.Errorf("backend got path %q, want %q", e.Path, want.Request.Path)
		}
		if want.Request.Method != e.Method {
			return fmt.Errorf("backend got method %q, want %q", e.Method, want.Request.Method)
		}
		if c.Namespace != e.Namespace {
			return fmt.Errorf("served from namespace %q, want %q", e.Namespace, c.Namespace)
		}
		gotReq := lower(e.Headers)
		for k, v := range want.Request.Headers {
			if g, ok := gotReq[strings.ToLower(k)]; !ok || strings.Join(g, ",") != v {
				return fmt.Errorf("backend got %s = %q, want %q", k, g, v)
			}
		}
		for _, k := range want.AbsentHeaders {
			if g, ok := gotReq[strings.ToLower(k)]; ok {
				return fmt.Errorf("backend got %s = %q, want it absent", k, g)
			}
		}
		gotResp := lower(got.header)
		norm := func(s string) string {
			if c.Response.IgnoreWhitespace {
				return strings.ReplaceAll(s, " ", "")
			}
			return s
		}
		for k, vals := range c.Response.ValidHeaderValues {
			g, ok := gotResp[strings.ToLower(k)]
			if !ok || !slices.ContainsFunc(vals, func(v string) bool { return norm(v) == norm(strings.Join(g, ",")) }) {
				return fmt.Errorf("response %s = %q, want one of %q", k, g, vals)
			}
		}
		for k, v := range c.Response.Headers {
			if g, ok := gotResp[strings.ToLower(k)]; !ok || norm(strings.Join(g, ",")) != norm(v) {
				return fmt.Errorf("response %s = %q, want %q", k, g, v)
			}
		}
		for _, k := range c.Response.AbsentHeaders {
			if g, ok := gotResp[strings.ToLower(k)]; ok {
				return fmt.Errorf("response %s = %q, want it absent", k, g)
			}
		}
		if !strings.HasPrefix(e.Pod, c.Backend) {
			return fmt.Errorf("served by pod %q, want one of %s", e.Pod, c.Backend)
		}
	case got.status >= 300 && got.status < 400:
		if c.RedirectRequest == nil {
			return nil
		}
		loc, err := url.Parse(got.header.Get("Location"))
		if err != nil {
			return fmt.Errorf("Location %q: %w", got.header.Get("Location"), err)
		}
		want := *c.RedirectRequest
		if want.Host == "" {
			want.Host = loc.Hostname()
		}
		if want.Scheme == "" {
			want.Scheme = got.request.URL.Scheme
		}
		if want.Path == "" {
			want.Path = got.request.URL.Path
		}
		if want.Host != loc.Hostname() {
			return fmt.Errorf("Location %s: host %q, want %q", loc, loc.Hostname(), want.Host)
		}
		port := loc.Port()
		switch {
		case want.Port != "" && want.Port != port:
			return fmt.Errorf("Location %s: port %q, want %q", loc, port, want.Port)
		case want.Port == "" && strings.EqualFold(loc.Scheme, "http") && port != "" && port != "80":
			return fmt.Errorf("Location %s: port %q, want 80 or none", loc, port)
		case want.Port == "" && strings.EqualFold(loc.Scheme, "https") && port != "" && port != "443":
			return fmt.Errorf("Location %s: port %q, want 443 or none", loc, port)
		}
		if want.Scheme != loc.Scheme {
			return fmt.Errorf("Location %s: scheme %q, want %q", loc, loc.Scheme, want.Scheme)
		}
		if want.Path != loc.Path {
			return fmt.Errorf("Location %s: path %q, want %q", loc, loc.Path, want.Path)
		}
	}
	return nil
}

// cleanupDelete deletes an object when t ends; one already gone is fine.
func cleanupDelete(t *testing.T, what string, del func() error) {
	t.Cleanup(func() {
		if err := del(); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s: %v", what, err)
		}
	})
}
