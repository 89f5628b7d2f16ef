package drain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
)

// DefaultSocket is a gateway pod's drain socket (gwruntime.DrainSocket).
const DefaultSocket = gwruntime.DrainSocket

// Path is the URL path of a drain request on the socket.
const Path = "/drain"

// maxSocketPath is the longest path a Unix socket address holds (sun_path is
// 108 bytes with the terminating NUL).
const maxSocketPath = 107

// CheckSocketPath says what is wrong with path as a drain socket path.
func CheckSocketPath(path string) error {
	if !filepath.IsAbs(path) {
		return errors.New("not an absolute path")
	}
	if len(path) > maxSocketPath {
		return fmt.Errorf("%d bytes long; a Unix socket path has at most %d", len(path), maxSocketPath)
	}
	return nil
}

// Listen creates the drain socket at path with mode 0600: only the
// chaperone's user (or root) can connect. The socket is made in a private
// directory (mode 0700) beside path, given its mode and only then renamed
// to path, so it is never connectable by others, whatever the umask. A
// socket left at path by an earlier run is replaced; anything else at path,
// or a socket something still serves, is an error. Closing the listener
// removes the socket.
func Listen(path string) (net.Listener, error) {
	if err := CheckSocketPath(path); err != nil {
		return nil, fmt.Errorf("drain socket %q: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("drain socket %s: the path exists and is not a socket; remove it or choose another path", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("drain socket %s: another process serves it (a second chaperone?)", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove the stale drain socket %s: %w", path, err)
		}
	}
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".drain-")
	if err != nil {
		return nil, fmt.Errorf("drain socket %s: %w", path, err)
	}
	defer os.RemoveAll(tmp)
	tmpSock := filepath.Join(tmp, "s")
	if len(tmpSock) > maxSocketPath {
		return nil, fmt.Errorf("drain socket %s: the directory's path is too long for a Unix socket; choose a shorter path", path)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmpSock, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("drain socket %s: %w", path, err)
	}
	l.SetUnlinkOnClose(false)
	if err := os.Chmod(tmpSock, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("drain socket %s: %w", path, err)
	}
	if err := os.Rename(tmpSock, path); err != nil {
		l.Close()
		return nil, fmt.Errorf("drain socket %s: %w", path, err)
	}
	return &socketListener{UnixListener: l, path: path}, nil
}

type socketListener struct {
	*net.UnixListener
	path string
}

func (l *socketListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

func (l *socketListener) Close() error {
	err := l.UnixListener.Close()
	os.Remove(l.path)
	return err
}

// Request asks the chaperone serving the drain socket at path to drain
// varnishd and waits until the drain has ended (or ctx ends). It returns
// the chaperone's answer ("drained") when no client session was left and
// varnishd was stopped; otherwise an error that says what happened and what
// to check.
func Request(ctx context.Context, path string) (string, error) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://chaperone"+Path, nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", requestError(ctx, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	answer := strings.TrimSpace(string(b))
	if err != nil {
		return "", requestError(ctx, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the drain failed (%d): %s", resp.StatusCode, answer)
	}
	return answer, nil
}

func requestError(ctx context.Context, path string, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("no end of the drain from the chaperone at %s in time: %w", path, ctx.Err())
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("no drain socket at %s: the chaperone is not running, or does not serve it there (sidecar mode serves it at its --drain-socket, default %s): %w", path, DefaultSocket, err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("nothing serves the drain socket %s (the chaperone has exited): %w", path, err)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("not allowed to connect to the drain socket %s (mode 0600): run this as the chaperone's user: %w", path, err)
	default:
		return fmt.Errorf("the chaperone at %s ended the drain request without an answer (did it exit or restart?): %w", path, err)
	}
}
