// Package varnishadm speaks the Varnish management CLI protocol (varnish-cli(7)):
// framed responses, challenge/response authentication with the -S secret, and
// typed wrappers for the commands the chaperone needs.
//
// The chaperone uses reverse mode: it listens, varnishd's manager connects to
// it (varnishd -M host:port) and Accept authenticates the connection. Dial is
// the forward mode (varnishd -T host:port), as varnishadm(1) uses it.
package varnishadm

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Status is a CLI response status (vcli.h).
type Status int

// The CLI response statuses.
const (
	StatusSyntax    Status = 100
	StatusUnknown   Status = 101
	StatusUnimpl    Status = 102
	StatusTooFew    Status = 104
	StatusTooMany   Status = 105
	StatusParam     Status = 106
	StatusAuth      Status = 107
	StatusOK        Status = 200
	StatusTruncated Status = 201
	StatusCant      Status = 300
	StatusComms     Status = 400
	StatusClose     Status = 500
)

// challengeLen is the length of the authentication challenge (CLI_AUTH_CHALLENGE_LEN).
const challengeLen = 32

// ErrAuth is returned when varnishd rejects the secret.
var ErrAuth = errors.New("varnishadm: authentication failed: the secret does not match the -S file varnishd was started with")

// Error is a command that varnishd answered with a status other than 200.
type Error struct {
	Command string
	Status  Status
	Body    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("varnishadm: %s: status %d: %s", e.Command, e.Status, strings.TrimSpace(e.Body))
}

// Conn is an authenticated CLI connection. Its methods are safe for
// concurrent use; commands run one at a time.
type Conn struct {
	mu      sync.Mutex
	conn    net.Conn
	r       *bufio.Reader
	banner  string
	timeout time.Duration
	// broken is the failure that left a command's answer unread; the
	// connection is closed and every later command fails with it.
	broken error
}

// ErrBroken is returned by commands on a connection that an earlier command
// left out of step with varnishd (it timed out, was cancelled or failed
// mid-answer). The connection is closed; varnishd's manager connects again
// (-M) and Accept takes the new connection.
var ErrBroken = errors.New("varnishadm: connection closed after an earlier command failed mid-answer; wait for varnishd to connect again")

// Option configures a connection.
type Option func(*Conn)

// WithTimeout bounds each command (default 60 seconds; vcl.load compiles VCL
// and can take several seconds).
func WithTimeout(d time.Duration) Option { return func(c *Conn) { c.timeout = d } }

// Accept waits on l for varnishd's manager to connect (varnishd -M) and
// authenticates with secret, the contents of the -S file. Connections that
// fail to authenticate are closed and Accept keeps waiting, until ctx ends.
func Accept(ctx context.Context, l net.Listener, secret []byte, opts ...Option) (*Conn, error) {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	for {
		nc, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("accept varnishd admin connection: %w", ctx.Err())
			}
			return nil, fmt.Errorf("accept varnishd admin connection: %w", err)
		}
		c, err := handshake(ctx, nc, secret, opts)
		if err == nil {
			return c, nil
		}
		nc.Close()
		if errors.Is(err, ErrAuth) {
			return nil, err
		}
	}
}

// Dial connects to a varnishd admin port (varnishd -T) and authenticates.
func Dial(ctx context.Context, addr string, secret []byte, opts ...Option) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial varnishd admin %s: %w", addr, err)
	}
	c, err := handshake(ctx, nc, secret, opts)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

func handshake(ctx context.Context, nc net.Conn, secret []byte, opts []Option) (*Conn, error) {
	c := &Conn{conn: nc, r: bufio.NewReader(nc), timeout: 60 * time.Second}
	for _, o := range opts {
		o(c)
	}
	deadline := time.Now().Add(10 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	nc.SetDeadline(deadline)
	defer nc.SetDeadline(time.Time{})

	status, body, err := c.read()
	if err != nil {
		return nil, fmt.Errorf("read varnishd admin greeting: %w", err)
	}
	if status == StatusAuth {
		if len(body) < challengeLen {
			return nil, fmt.Errorf("varnishd admin greeting: challenge too short (%d bytes)", len(body))
		}
		if err := c.write("auth " + AuthResponse(body[:challengeLen], secret) + "\n"); err != nil {
			return nil, err
		}
		if status, body, err = c.read(); err != nil {
			return nil, fmt.Errorf("read varnishd admin auth answer: %w", err)
		}
		if status == StatusAuth || status == StatusClose {
			return nil, ErrAuth
		}
	}
	if status != StatusOK {
		return nil, &Error{Command: "(greeting)", Status: status, Body: body}
	}
	c.banner = body
	return c, nil
}

// AuthResponse computes the answer to a CLI challenge: the hex SHA-256 of
// challenge, newline, secret, challenge, newline.
func AuthResponse(challenge string, secret []byte) string {
	// A hash.Hash's Write never returns an error.
	h := sha256.New()
	_, _ = io.WriteString(h, challenge+"\n")
	h.Write(secret)
	_, _ = io.WriteString(h, challenge+"\n")
	return hex.EncodeToString(h.Sum(nil))
}

// Banner is the text varnishd sent after authentication.
func (c *Conn) Banner() string { return c.banner }

// Close closes the connection.
func (c *Conn) Close() error { return c.conn.Close() }

// Do runs a command, quoting each argument as needed, and returns the body of
// a 200 answer. Any other status is an *Error.
func (c *Conn) Do(ctx context.Context, args ...string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("varnishadm: empty command")
	}
	line := make([]string, len(args))
	for i, a := range args {
		line[i] = Quote(a)
	}
	return c.send(ctx, strings.Join(line, " ")+"\n", args[0])
}

// send writes one command and reads its answer. A context that has already
// ended sends nothing. A failure after the command was sent closes the
// connection: its answer may still arrive and would be read as the next
// command's.
func (c *Conn) send(ctx context.Context, text, name string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("varnishadm: %s: %w", name, err)
	}
	if c.broken != nil {
		return "", fmt.Errorf("varnishadm: %s: %w (%v)", name, ErrBroken, c.broken)
	}
	deadline := time.Now().Add(c.timeout)
	ctxDeadline := false
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline, ctxDeadline = d, true
	}
	c.conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Now()) })
	defer stop()

	err := c.write(text)
	var status Status
	var body string
	if err == nil {
		status, body, err = c.read()
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			err = ctx.Err()
		case ctxDeadline && errors.Is(err, os.ErrDeadlineExceeded):
			// The connection's deadline was the context's: it can pass a
			// moment before the context notices.
			err = context.DeadlineExceeded
		}
		c.broken = err
		c.conn.Close()
		return "", fmt.Errorf("varnishadm: %s: %w", name, err)
	}
	if status != StatusOK {
		return body, &Error{Command: name, Status: status, Body: body}
	}
	return body, nil
}

func (c *Conn) write(s string) error {
	if _, err := io.WriteString(c.conn, s); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// read reads one framed response: "SSS LLLLLLLL\n", L bytes of body, "\n".
func (c *Conn) read() (Status, string, error) {
	head, err := c.r.ReadString('\n')
	if err != nil {
		return 0, "", err
	}
	fields := strings.Fields(head)
	if len(fields) != 2 {
		return 0, "", fmt.Errorf("malformed response header %q", head)
	}
	status, err1 := strconv.Atoi(fields[0])
	n, err2 := strconv.Atoi(fields[1])
	if err1 != nil || err2 != nil || n < 0 {
		return 0, "", fmt.Errorf("malformed response header %q", head)
	}
	body := make([]byte, n+1)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return 0, "", fmt.Errorf("read %d-byte response body: %w", n, err)
	}
	return Status(status), string(body[:n]), nil
}

// Quote quotes a CLI argument the way the CLI parser (VAV_Parse) reads it:
// bare when it has no special characters, otherwise in double quotes with
// backslash escapes.
func Quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n\r\"\\{}") && !strings.HasPrefix(s, "<<") {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
