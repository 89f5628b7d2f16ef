package routing

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	discoveryv1 "k8s.io/api/discovery/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/mainvcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

// TestConformanceWebSocketThroughGhost replays the suite's
// HTTPRouteBackendProtocolWebSocket test through a real varnishd and ghost
// with the main.vcl the provider renders: the suite's route to the base
// Service port with appProtocol kubernetes.io/ws resolves, and a WebSocket
// dialled as the suite does (golang.org/x/net/websocket, path /ws) echoes a
// text and a binary message from the backend the route names.
func TestConformanceWebSocketThroughGhost(t *testing.T) {
	dir := conformanceDir(t)
	var upgrades atomic.Int64
	echo := websocket.Server{Handler: func(c *websocket.Conn) {
		upgrades.Add(1)
		for {
			var f struct {
				typ  byte
				data []byte
			}
			codec := websocket.Codec{
				Marshal: func(any) ([]byte, byte, error) { return f.data, f.typ, nil },
				Unmarshal: func(data []byte, typ byte, _ any) error {
					f.typ, f.data = typ, data
					return nil
				},
			}
			if codec.Receive(c, nil) != nil || codec.Send(c, nil) != nil {
				return
			}
		}
	}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: echo}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	backendPort := int32(l.Addr().(*net.TCPAddr).Port)

	base := readManifests(t, filepath.Join(dir, "base", "manifests.yaml"))
	m := readManifests(t, filepath.Join(dir, "tests", "httproute-backend-protocol-websocket.yaml"))
	if len(m.routes) != 1 {
		t.Fatalf("%d routes in httproute-backend-protocol-websocket.yaml, want 1", len(m.routes))
	}
	objs := &Objects{Namespaces: base.namespaces, Services: base.services}
	wsPorts := 0
	for _, svc := range objs.Services {
		for _, p := range svc.Spec.Ports {
			if p.AppProtocol != nil && *p.AppProtocol == "kubernetes.io/ws" {
				wsPorts++
			}
			objs.EndpointSlices = append(objs.EndpointSlices, slice(svc.Namespace, svc.Name, svc.Name+"-"+p.Name,
				discoveryv1.AddressTypeIPv4, p.Name, backendPort, ep(nil, "127.0.0.1")))
		}
	}
	if wsPorts == 0 {
		t.Fatal("no Service port with appProtocol kubernetes.io/ws in the base manifests: the suite changed")
	}
	var gw *gatewayv1.Gateway
	for _, g := range base.gateways {
		if g.Name == "same-namespace" {
			gw = g
		}
	}
	f, err := Attach(gw, m.routes[0], objs)
	if err != nil || !f.Accepted() {
		t.Fatalf("%s: %v %+v", m.routes[0].Name, err, f)
	}
	if got := condition(f, gatewayv1.RouteConditionResolvedRefs); got != "ResolvedRefs" {
		t.Fatalf("ResolvedRefs: %s, want ResolvedRefs", got)
	}
	tb, err := Merge(gw, []*Fragment{f})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Resolve(tb, objs)
	if err != nil {
		t.Fatal(err)
	}
	data, err := ghostjson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(varnishdtest.Dir(t), "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, mainvcl.GhostJSON), data, 0o644); err != nil {
		t.Fatal(err)
	}
	listen := varnishdtest.FreeAddr(t)
	p := varnishdtest.Start(t, varnishd.Config{
		WorkDir:        work,
		Listeners:      []varnishd.Listener{{Name: ghostjson.SocketName(gw.Spec.Listeners[0].Port), Addr: listen}},
		GhostAdminAddr: varnishdtest.FreeAddr(t),
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Admin.VCLInline(ctx, "main", mainvcl.Render(mainvcl.Options{VMOD: varnishdtest.GhostVMOD(t)})); err != nil {
		t.Fatalf("vcl.inline: %v", err)
	}
	if err := p.Admin.VCLUse(ctx, "main"); err != nil {
		t.Fatal(err)
	}

	// as the suite: origin ws://gateway/<test name>, remote ws://<gateway>/ws
	ws, err := websocket.Dial("ws://"+listen+"/ws", "", "ws://gateway/"+t.Name())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer ws.Close()
	if err := ws.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	text, reply := "Websocket Support!", ""
	if err := websocket.Message.Send(ws, text); err != nil {
		t.Fatal(err)
	}
	if err := websocket.Message.Receive(ws, &reply); err != nil || reply != text {
		t.Errorf("text reply %q (%v), want %q", reply, err, text)
	}
	bin, binReply := []byte{1, 2, 3, 4, 5, 6, 7}, []byte(nil)
	if err := websocket.Message.Send(ws, bin); err != nil {
		t.Fatal(err)
	}
	if err := websocket.Message.Receive(ws, &binReply); err != nil || !bytes.Equal(binReply, bin) {
		t.Errorf("binary reply %v (%v), want %v", binReply, err, bin)
	}
	if n := upgrades.Load(); n != 1 {
		t.Errorf("the backend completed %d WebSocket handshakes, want 1", n)
	}
	t.Logf("HTTPRouteBackendProtocolWebSocket checked through %s and ghost", varnishdtest.Bin(t))
}
