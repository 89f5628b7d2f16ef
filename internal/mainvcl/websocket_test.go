package mainvcl

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishstat"
)

// echoServer is a WebSocket echo backend that prefixes each text message
// with its name, so a test sees which backend answered; binary messages come
// back unchanged. Plain requests get "plain NAME" with a cacheable
// Cache-Control.
type echoServer struct {
	name     string
	upgrades atomic.Int64 // WebSocket handshakes completed
	plain    atomic.Int64 // plain requests
	port     int
}

type frame struct {
	payloadType byte
	data        []byte
}

func startEcho(t *testing.T, name string) *echoServer {
	t.Helper()
	e := &echoServer{name: name}
	// frames keeps each message's payload type, which the Message codec
	// does not report.
	frames := websocket.Codec{
		Marshal: func(v any) ([]byte, byte, error) {
			f := v.(frame)
			return f.data, f.payloadType, nil
		},
		Unmarshal: func(data []byte, payloadType byte, v any) error {
			*v.(*frame) = frame{payloadType, data}
			return nil
		},
	}
	ws := websocket.Server{Handler: func(c *websocket.Conn) {
		e.upgrades.Add(1)
		for {
			var f frame
			if err := frames.Receive(c, &f); err != nil {
				return
			}
			if f.payloadType == websocket.TextFrame {
				f.data = append([]byte(e.name+": "), f.data...)
			}
			if err := frames.Send(c, f); err != nil {
				return
			}
		}
	}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			ws.ServeHTTP(w, r)
			return
		}
		e.plain.Add(1)
		w.Header().Set("Cache-Control", "max-age=60")
		fmt.Fprintf(w, "plain %s", e.name)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	e.port = l.Addr().(*net.TCPAddr).Port
	return e
}

// TestRenderPipesWebSockets runs rendered main.vcl in a real varnishd with
// ghost and real WebSocket clients and servers (golang.org/x/net/websocket,
// the library of the Gateway API conformance test): an upgrade on a route
// reaches the backend ghost chose for it, text and binary frames flow both
// ways, several messages on one connection, also on a route whose cache
// policy caches its plain requests (each upgrade reaches the backend, none
// is answered from the cache), and even when user VCL would look every
// request up. Plain requests on the same URL are still cached.
func TestRenderPipesWebSockets(t *testing.T) {
	chat := startEcho(t, "chat")
	live := startEcho(t, "live")
	doc := fmt.Sprintf(`{"version":2,
"backends":[{"name":"ns/chat:80","websocket":true,"endpoints":[{"address":"127.0.0.1","port":%d}]},
            {"name":"ns/live:80","websocket":true,"endpoints":[{"address":"127.0.0.1","port":%d}]}],
"cachePolicies":[{"name":"gateway","ttlMs":120000,"statusHeader":"x-cache"}],
"vhosts":[{"hostname":"ws.test","routes":[
  {"name":"ns/chat/0","match":{"path":{"type":"PathPrefix","value":"/chat"}},"backends":[{"backend":"ns/chat:80"}]},
  {"name":"ns/live/0","match":{"path":{"type":"PathPrefix","value":"/"}},"backends":[{"backend":"ns/live:80"}],"cache":"gateway"}]}]}`,
		chat.port, live.port)

	vmod := varnishdtest.GhostVMOD(t)
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{name: "defaults"},
		{name: "user VCL looks everything up", opts: Options{GatewayVCL: "sub vcl_recv { return (hash); }"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := filepath.Join(varnishdtest.Dir(t), "work")
			if err := os.MkdirAll(work, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(work, GhostJSON), []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			listen := varnishdtest.FreeAddr(t)
			p := varnishdtest.Start(t, varnishd.Config{
				WorkDir:        work,
				Listeners:      []varnishd.Listener{{Name: "port-" + strconv.Itoa(varnishdtest.Port(t, listen)), Addr: listen}},
				GhostAdminAddr: varnishdtest.FreeAddr(t),
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			tc.opts.VMOD = vmod
			if err := p.Admin.VCLInline(ctx, "main", Render(tc.opts)); err != nil {
				t.Fatalf("vcl.inline: %v", err)
			}
			if err := p.Admin.VCLUse(ctx, "main"); err != nil {
				t.Fatal(err)
			}
			chat.upgrades.Store(0)
			live.upgrades.Store(0)
			live.plain.Store(0)

			// dial opens a WebSocket to path with Host ws.test and checks
			// that text frames come back from want and binary frames
			// unchanged, three round trips on one connection.
			dial := func(path, want string) {
				t.Helper()
				cfg, err := websocket.NewConfig("ws://ws.test"+path, "http://ws.test/")
				if err != nil {
					t.Fatal(err)
				}
				conn, err := net.DialTimeout("tcp", listen, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				conn.SetDeadline(time.Now().Add(10 * time.Second))
				ws, err := websocket.NewClient(cfg, conn)
				if err != nil {
					conn.Close()
					t.Fatalf("WebSocket handshake on %s: %v", path, err)
				}
				defer ws.Close()
				for i := range 3 {
					text := fmt.Sprintf("hello %d", i)
					if err := websocket.Message.Send(ws, text); err != nil {
						t.Fatalf("%s: send text: %v", path, err)
					}
					var reply string
					if err := websocket.Message.Receive(ws, &reply); err != nil {
						t.Fatalf("%s: receive text: %v", path, err)
					}
					if wantReply := want + ": " + text; reply != wantReply {
						t.Errorf("%s: text reply %q, want %q", path, reply, wantReply)
					}
					bin := []byte{0, 1, 2, byte(i), 0xff}
					if err := websocket.Message.Send(ws, bin); err != nil {
						t.Fatalf("%s: send binary: %v", path, err)
					}
					var got []byte
					if err := websocket.Message.Receive(ws, &got); err != nil {
						t.Fatalf("%s: receive binary: %v", path, err)
					}
					if !bytes.Equal(got, bin) {
						t.Errorf("%s: binary reply %v, want %v", path, got, bin)
					}
				}
			}
			get := func(path string) *http.Response {
				t.Helper()
				req, _ := http.NewRequest("GET", "http://"+listen+path, nil)
				req.Host = "ws.test"
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp
			}

			dial("/chat/room", "chat")
			// the cached route: a plain GET fills the cache, the
			// upgrades on the same URL still reach the backend
			if r := get("/feed"); r.StatusCode != 200 {
				t.Fatalf("plain GET: %d", r.StatusCode)
			}
			dial("/feed", "live")
			dial("/feed", "live")
			if r := get("/feed"); r.Header.Get("x-cache") != "HIT" && tc.opts.GatewayVCL == "" {
				t.Errorf("second plain GET: x-cache %q, want HIT: upgrades must not disturb caching", r.Header.Get("x-cache"))
			}
			if got := chat.upgrades.Load(); got != 1 {
				t.Errorf("chat backend completed %d handshakes, want 1", got)
			}
			if got := live.upgrades.Load(); got != 2 {
				t.Errorf("live backend completed %d handshakes, want 2 (an upgrade is never answered from the cache)", got)
			}
			if got := live.plain.Load(); got != 1 {
				t.Errorf("live backend saw %d plain requests, want 1 (the second from the cache)", got)
			}
		})
	}
}

// TestWebSocketSessionAndPipeTimeout checks what docs/guides/websockets.md
// and the drain documentation say about a piped WebSocket: it is a live
// client session (MEMPOOL.sess*.live, which a drain waits for) while open,
// and varnishd's pipe_timeout closes it after that long without traffic in
// either direction, which frees the session.
func TestWebSocketSessionAndPipeTimeout(t *testing.T) {
	echo := startEcho(t, "echo")
	doc := fmt.Sprintf(`{"version":2,"backends":[{"name":"ns/echo:80","websocket":true,"endpoints":[{"address":"127.0.0.1","port":%d}]}],
"vhosts":[{"hostname":"ws.test","routes":[{"name":"r","match":{"path":{"type":"PathPrefix","value":"/"}},"backends":[{"backend":"ns/echo:80"}]}]}]}`, echo.port)
	work := filepath.Join(varnishdtest.Dir(t), "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, GhostJSON), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	listen := varnishdtest.FreeAddr(t)
	p := varnishdtest.Start(t, varnishd.Config{
		WorkDir:        work,
		Listeners:      []varnishd.Listener{{Name: "port-" + strconv.Itoa(varnishdtest.Port(t, listen)), Addr: listen}},
		GhostAdminAddr: varnishdtest.FreeAddr(t),
		Params:         []string{"pipe_timeout=2"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Admin.VCLInline(ctx, "main", Render(Options{VMOD: varnishdtest.GhostVMOD(t)})); err != nil {
		t.Fatalf("vcl.inline: %v", err)
	}
	if err := p.Admin.VCLUse(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	stat := varnishstat.Reader{Bin: varnishdtest.StatBin(t), WorkDir: p.WorkDir()}
	// live waits until the live session count satisfies ok.
	live := func(what string, ok func(uint64) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			s, err := stat.Read(ctx)
			n, have := s.LiveSessions()
			if err == nil && have && ok(n) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("live sessions %d (read error %v): want %s", n, err, what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	cfg, err := websocket.NewConfig("ws://ws.test/", "http://ws.test/")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", listen, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := websocket.NewClient(cfg, conn)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	defer ws.Close()
	if err := ws.SetDeadline(time.Now().Add(15 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var reply string
	if err := websocket.Message.Send(ws, "ping"); err != nil {
		t.Fatal(err)
	}
	if err := websocket.Message.Receive(ws, &reply); err != nil || reply != "echo: ping" {
		t.Fatalf("reply %q (%v), want %q", reply, err, "echo: ping")
	}
	live("at least 1 while the WebSocket is open", func(n uint64) bool { return n >= 1 })
	// idle: pipe_timeout (2 s) closes the pipe, the client reads EOF
	start := time.Now()
	if err := websocket.Message.Receive(ws, &reply); err == nil {
		t.Fatalf("received %q on an idle WebSocket, want the connection closed by pipe_timeout", reply)
	}
	if d := time.Since(start); d < 1500*time.Millisecond || d > 10*time.Second {
		t.Errorf("the idle WebSocket was closed after %v, want about pipe_timeout (2 s)", d)
	}
	live("0 after pipe_timeout closed the WebSocket", func(n uint64) bool { return n == 0 })
}
