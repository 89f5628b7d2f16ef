package varnishdtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

var (
	ghostOnce  sync.Once
	ghostBuilt string // libvmod_ghost.so in the source tree
	ghostErr   error
)

// GhostVMOD builds the ghost VMOD (make -C ghost all, once per test binary,
// serialized across test binaries with a lock file) and returns a copy of
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
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "varnishgw-ghost-build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock the ghost build: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if out, err := exec.Command("make", "-C", filepath.Join(root, "ghost"), "all").CombinedOutput(); err != nil {
		return "", fmt.Errorf("make -C ghost all: %w\n%s", err, out)
	}
	return filepath.Join(root, "ghost", "libvmod_ghost.so"), nil
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
