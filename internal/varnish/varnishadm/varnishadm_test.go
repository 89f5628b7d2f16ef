package varnishadm

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"boot", "boot"},
		{"vcl.use", "vcl.use"},
		{"", `""`},
		{"two words", `"two words"`},
		{`say "hi"`, `"say \"hi\""`},
		{`back\slash`, `"back\\slash"`},
		{"line\nbreak\ttab", `"line\nbreak\ttab"`},
		{"<<EOF", `"<<EOF"`},
		{`{"x"}`, `"{\"x\"}"`},
	} {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestAuthResponse(t *testing.T) {
	// Known answer, computed independently with
	//   printf 'abcdefghijklmnopqrstuvwxyzabcdef\ns3cr3t\nabcdefghijklmnopqrstuvwxyzabcdef\n' | sha256sum
	got := AuthResponse("abcdefghijklmnopqrstuvwxyzabcdef", []byte("s3cr3t\n"))
	const want = "3cb26bbc71583dab94e3ce5af011354aca731edaf344c6755c0964a1d972b64e"
	if got != want {
		t.Errorf("AuthResponse = %s, want %s", got, want)
	}
}

func TestReadFraming(t *testing.T) {
	for _, tc := range []struct {
		name, wire string
		status     Status
		body       string
		wantErr    bool
	}{
		{"ok", "200 5       \nhello\n", StatusOK, "hello", false},
		{"empty body", "200 0       \n\n", StatusOK, "", false},
		{"body with newlines", "300 7       \na\nb\nc d\n", StatusCant, "a\nb\nc d", false},
		{"bad header", "2x0 5\nhello\n", 0, "", true},
		{"short body", "200 10      \nabc", 0, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Conn{r: bufio.NewReader(strings.NewReader(tc.wire))}
			status, body, err := c.read()
			if (err != nil) != tc.wantErr {
				t.Fatalf("read: err = %v, wantErr %v", err, tc.wantErr)
			}
			if status != tc.status || body != tc.body {
				t.Errorf("read = %d %q, want %d %q", status, body, tc.status, tc.body)
			}
		})
	}
}

// pipeConn is a Conn over one end of a pipe; the test plays varnishd on the
// other end.
func pipeConn(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	return &Conn{conn: client, r: bufio.NewReader(client), timeout: time.Minute}, server
}

func TestEndedContextSendsNothing(t *testing.T) {
	c, server := pipeConn(t)
	// The far end answers at once: only the context check keeps the
	// command from being sent and answered.
	go func() {
		r := bufio.NewReader(server)
		for {
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
			io.WriteString(server, "200 4       \nPONG\n")
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < 100; i++ {
		if _, err := c.Do(ctx, "ping"); !errors.Is(err, context.Canceled) {
			t.Fatalf("ping %d with a cancelled context: got %v, want context.Canceled", i, err)
		}
	}
	// The connection is still in step: nothing was sent.
	if body, err := c.Do(context.Background(), "ping"); err != nil || body != "PONG" {
		t.Fatalf("ping after the cancelled ones = %q, %v; want PONG", body, err)
	}
}

func TestLateAnswerIsNeverReadAsTheNext(t *testing.T) {
	c, server := pipeConn(t)
	sent := make(chan string, 2)
	go func() {
		r := bufio.NewReader(server)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			sent <- line
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Do(ctx, "vcl.load", "slow", "/slow.vcl"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unanswered vcl.load: got %v, want context.DeadlineExceeded", err)
	}
	<-sent
	// The late answer to vcl.load must not become status's answer.
	go io.WriteString(server, "200 13      \nVCL compiled.\n")
	_, err := c.Do(context.Background(), "status")
	if !errors.Is(err, ErrBroken) {
		t.Fatalf("status after a timed-out command: got %v, want ErrBroken", err)
	}
	if !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("error %q does not say what broke the connection", err)
	}
	select {
	case line := <-sent:
		t.Errorf("status was sent on the broken connection: %q", line)
	default:
	}
}
