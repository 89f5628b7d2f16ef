package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnishd/varnishdtest"
)

// TestDemo runs `make demo`'s command with -once (and free ports instead of
// the pod's): it must apply examples/demo, serve the declared routes and
// stop cleanly after draining.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own control plane")
	}
	bin := providerDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	port := varnishdtest.Port(t, varnishdtest.FreeAddr(t))
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "demo"), "-once", "-bin", bin, "-example", "../examples/demo",
		"-port", strconv.Itoa(port), "-health-addr", varnishdtest.FreeAddr(t),
		"-admin-addr", varnishdtest.FreeAddr(t), "-ghost-admin-addr", varnishdtest.FreeAddr(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo -once: %v\n%s", err, out)
	}
	for _, want := range []string{
		`-H 'Host: www.demo.local' http://127.0.0.1:\d+/\n\s+→ 200 from backend web-\d`,
		`/catalog\n\s+→ 301, Location: http://www.demo.local(:\d+)?/products`,
		`-H 'x-beta: 1' http://127.0.0.1:\d+/v2/items\n\s+→ 200 from backend api-beta-1`,
		`http://127.0.0.1:\d+/v2/items\n\s+→ 200 from backend api(-canary)?-\d`,
		`unknown.demo.local' http://127.0.0.1:\d+/\n\s+→ 404`,
		`→ api: \d+, api-canary: \d+`,
		`draining the gateway and stopping everything`,
	} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", out)
	}
}
