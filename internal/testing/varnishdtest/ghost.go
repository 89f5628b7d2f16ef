package varnishdtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

var (
	ghostOnce  sync.Once
	ghostBuilt string // libvmod_ghost.so in the source tree
	ghostErr   error
)

// GhostVMOD builds the ghost VMOD for the selected Varnish (EnvVarnish; make
// -C ghost all, with VARNISH=7.7 for 7.7, once per test binary, serialized
// across test binaries with a lock file) and returns a copy of
// libvmod_ghost.so in a directory of the test that user vcache can read.
// It fails the test when the build fails.
func GhostVMOD(t testing.TB) string {
	t.Helper()
	path, err := BuildGhost(Dir(t))
	if err != nil {
		t.Fatalf("build the ghost VMOD (run make setup for its build dependencies): %v", err)
	}
	return path
}

// BuildGhost is GhostVMOD for TestMain, where there is no testing.TB: the
// copy goes into dir, which must be readable by others.
func BuildGhost(dir string) (string, error) {
	ghostOnce.Do(func() { ghostBuilt, ghostErr = buildGhost() })
	if ghostErr != nil {
		return "", ghostErr
	}
	so, err := os.ReadFile(ghostBuilt)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "libvmod_ghost.so")
	return path, os.WriteFile(path, so, 0o755)
}

func buildGhost() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	// Read-only: flock needs no write access, and another user (root) may own the file.
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "varnishgw-ghost-build.lock"), os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock the ghost build: %w", err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }() // lock.Close releases it too
	sel, err := selectVarnish()
	if err != nil {
		return "", err
	}
	args := []string{"-C", filepath.Join(root, "ghost"), "all"}
	so := filepath.Join(root, "ghost", "libvmod_ghost.so")
	if sel.version != "" {
		// $ABI strict: one build per varnishd
		args = append(args, "VARNISH="+sel.version)
		so = filepath.Join(root, "ghost", "build-"+sel.version, "libvmod_ghost.so")
	}
	if out, err := exec.Command("make", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("make %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return so, nil
}

// repoRoot is the directory of go.mod above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// MainVCL is the main.vcl of tests: ghost at vmod routes everything from
// ghostJSON, passes routed requests, and vcl_deliver sets X-Gen to ghost's
// generation, followed by the statements in deliver.
func MainVCL(vmod, ghostJSON string, deliver ...string) string {
	var extra strings.Builder
	for _, s := range deliver {
		extra.WriteString("\t" + s + "\n")
	}
	return fmt.Sprintf(`vcl 4.1;
import ghost from %q;
backend default none;
sub vcl_init {
	new router = ghost.router(%q);
}
sub vcl_recv {
	if (router.recv()) {
		return (pass);
	}
	return (synth(router.status()));
}
sub vcl_synth {
	router.synth();
	return (deliver);
}
sub vcl_deliver {
	router.deliver();
	set resp.http.X-Gen = router.generation();
%s}
`, vmod, ghostJSON, extra.String())
}
