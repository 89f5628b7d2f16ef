package testenv

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/toolsenv"
)

var shared struct {
	sync.Mutex
	main     bool
	withNode bool
	started  bool
	cp       *ControlPlane
	err      error
	nodeErr  error // why the machine cannot run a node, with WithNode
}

// An Option changes what Main does.
type Option func(*mainConfig)

type mainConfig struct {
	node    bool
	cleanup []func()
}

// WithNode makes the package's shared control plane a single-node cluster
// (see Node): GetNode returns its node. Packages that need only the API
// server leave it out and keep the fast start (etcd and kube-apiserver on
// loopback, no node).
func WithNode() Option { return func(c *mainConfig) { c.node = true } }

// AfterTests runs f after the tests, before the control plane stops.
func AfterTests(f func()) Option { return func(c *mainConfig) { c.cleanup = append(c.cleanup, f) } }

// Main runs the tests of a package that uses the shared control plane and
// stops the control plane afterwards, also when the run is interrupted by
// SIGINT or SIGTERM. Call it from TestMain. When stopping a node could not
// restore the machine completely, the run fails.
func Main(m *testing.M, opts ...Option) {
	var cfg mainConfig
	for _, o := range opts {
		o(&cfg)
	}
	// Plain `go test` finds the tools make setup built (bin/tools.env).
	if _, err := toolsenv.Load(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		os.Exit(1)
	}
	shared.Lock()
	shared.main = true
	shared.withNode = cfg.node
	shared.Unlock()

	stopOnSignal()
	code := m.Run()
	for _, f := range cfg.cleanup {
		f()
	}
	if err := stopShared(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stop the control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// stopOnSignal stops the shared control plane and exits on SIGINT or SIGTERM.
func stopOnSignal() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		if err := stopShared(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stop the control plane: %v\n", err)
		}
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
	startShared()
	if shared.err != nil {
		t.Fatalf("start the test control plane: %v", shared.err)
	}
	return shared.cp
}

// GetNode returns the test binary's node, starting the control plane and
// the node on first use; the package's TestMain must call
// testenv.Main(m, testenv.WithNode()). On a machine that cannot run a node
// (see NodeSupported) it fails the test with the reason, or skips it when
// VARNISHGW_SKIP_NODE=1; with -short it skips.
func GetNode(t testing.TB) *Node {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a test node (kubelet, containerd); skipped with -short")
	}
	shared.Lock()
	defer shared.Unlock()
	if !shared.main || !shared.withNode {
		t.Fatal("testenv.GetNode: the package's TestMain must call testenv.Main(m, testenv.WithNode())")
	}
	startShared()
	if shared.nodeErr != nil {
		if os.Getenv(EnvSkipNode) == "1" {
			t.Skipf("%v (%s=1)", shared.nodeErr, EnvSkipNode)
		}
		t.Fatalf("%v\n(set %s=1 to skip the tests that need a node on such a machine)", shared.nodeErr, EnvSkipNode)
	}
	if shared.err != nil {
		t.Fatalf("start the test control plane with a node: %v", shared.err)
	}
	n := shared.cp.Node
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the node's logs are in %s/logs (removed when the node stops); their last lines:\n%s", nodeBase, n.logTails(20))
		}
	})
	return n
}

// startShared starts the shared control plane once, with a node when the
// package asked for one and the machine can run it. The caller holds
// shared's lock.
func startShared() {
	if shared.started {
		return
	}
	shared.started = true
	opts := Options{}
	if shared.withNode {
		if shared.nodeErr = NodeSupported(); shared.nodeErr == nil {
			opts.Node = &NodeOptions{}
		}
	}
	shared.cp, shared.err = Start(context.Background(), opts)
	if shared.err == nil && shared.cp.Node != nil {
		fmt.Fprintf(os.Stderr, "testenv: node %s started in %v\n", shared.cp.Node.Name, shared.cp.Node.StartTime.Round(100*time.Millisecond))
	}
}

func stopShared() error {
	shared.Lock()
	defer shared.Unlock()
	err := shared.cp.Stop()
	shared.cp = nil
	return err
}
