package testenv

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
)

var shared struct {
	sync.Mutex
	main    bool
	started bool
	cp      *ControlPlane
	err     error
}

// Main runs the tests of a package that uses the shared control plane and
// stops the control plane afterwards, also when the run is interrupted by
// SIGINT or SIGTERM. Call it from TestMain. The cleanup functions run after
// the tests, before the control plane stops.
func Main(m *testing.M, cleanup ...func()) {
	shared.Lock()
	shared.main = true
	shared.Unlock()

	stopOnSignal()
	code := m.Run()
	for _, f := range cleanup {
		f()
	}
	stopShared()
	os.Exit(code)
}

// stopOnSignal stops the shared control plane and exits on SIGINT or SIGTERM.
func stopOnSignal() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		stopShared()
		fmt.Fprintf(os.Stderr, "testenv: %v: control plane stopped\n", sig)
		os.Exit(128 + int(sig.(syscall.Signal)))
	}()
}

// Get returns the test binary's control plane, starting it on first use. It
// fails the test when the control plane cannot start, and skips it with
// -short.
func Get(t testing.TB) *ControlPlane {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the test control plane (etcd and kube-apiserver); skipped with -short")
	}
	shared.Lock()
	defer shared.Unlock()
	if !shared.main {
		t.Fatal("testenv.Get: the package's TestMain must call testenv.Main(m)")
	}
	if !shared.started {
		shared.started = true
		shared.cp, shared.err = Start(context.Background(), Options{})
	}
	if shared.err != nil {
		t.Fatalf("start the test control plane: %v", shared.err)
	}
	return shared.cp
}

func stopShared() {
	shared.Lock()
	defer shared.Unlock()
	shared.cp.Stop()
	shared.cp = nil
}
