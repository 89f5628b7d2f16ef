package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
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
