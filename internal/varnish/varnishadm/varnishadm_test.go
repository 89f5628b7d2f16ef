package varnishadm

import (
	"bufio"
	"strings"
	"testing"
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
