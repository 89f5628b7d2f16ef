package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.AfterTests(func() {
		if buildDir != "" {
			os.RemoveAll(buildDir)
		}
	}))
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// providerDir builds the provider, the chaperone and the demo once per test binary
// into a directory readable by others and returns it.
func providerDir(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "varnishgw-e2e-bin-")
		if buildErr != nil {
			return
		}
		if buildErr = os.Chmod(buildDir, 0o755); buildErr != nil {
			return
		}
		for _, pkg := range []string{".", "./chaperone", "./internal/demo/cmd/demo"} {
			cmd := exec.Command("go", "build", "-o", buildDir+string(filepath.Separator), pkg)
			cmd.Dir = ".."
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = &buildError{pkg, err, out}
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

type buildError struct {
	pkg string
	err error
	out []byte
}

func (e *buildError) Error() string {
	return "go build " + e.pkg + ": " + e.err.Error() + "\n" + string(e.out)
}

// startChaperone starts the chaperone binary (demo.StartChaperone) with
// opts, filling in the binary, free admin and ghost-admin addresses (and a
// health address unless set) and its standard error in opts.Dir's
// chaperone.log, whose tail the test logs when it fails; the chaperone is
// killed when the test ends.
func startChaperone(ctx context.Context, t *testing.T, cp *testenv.ControlPlane, opts demo.ChaperoneOptions) *demo.Chaperone {
	t.Helper()
	logPath := filepath.Join(opts.Dir, "chaperone.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	opts.Binary, opts.Stderr = filepath.Join(providerDir(t), "chaperone"), logFile
	opts.AdminAddr, opts.GhostAdminAddr = varnishdtest.FreeAddr(t), varnishdtest.FreeAddr(t)
	if opts.HealthAddr == "" {
		opts.HealthAddr = varnishdtest.FreeAddr(t)
	}
	ch, err := demo.StartChaperone(ctx, cp.Client, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Kill)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			prefix := ""
			if opts.PodName != "" {
				prefix = opts.PodName + ": "
			}
			t.Logf("%schaperone log (tail):\n%s", prefix, b)
		}
	})
	return ch
}
