package nodetest

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

const envPrintSupported = "NODETEST_PRINT_SUPPORTED"

// TestNodeSupportedSaysWhy runs this test binary where a node cannot run
// and checks that NodeSupported says why, and that GetNode fails the test
// with the reason, or skips it with VARNISHGW_SKIP_NODE=1.
func TestNodeSupportedSaysWhy(t *testing.T) {
	if err := testenv.NodeSupported(); err != nil {
		t.Skipf("this machine cannot run a node anyway: %v", err)
	}
	noTools := []string{testenv.EnvKubeBinDir + "=", testenv.EnvPauseImage + "="}
	run := func(t *testing.T, cmd *exec.Cmd) string {
		t.Helper()
		out, _ := cmd.CombinedOutput()
		return string(out)
	}

	t.Run("tools missing", func(t *testing.T) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), append(noTools, envPrintSupported+"=1")...)
		out := run(t, cmd)
		for _, want := range []string{"this machine cannot run a test node", testenv.EnvKubeBinDir + " is not set", testenv.EnvPauseImage + " is not set", "make setup"} {
			if !strings.Contains(out, want) {
				t.Errorf("NodeSupported without the tools lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("not root", func(t *testing.T) {
		// A copy of this binary that nobody may run.
		dir := t.TempDir()
		for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		bin := filepath.Join(dir, "nodetest.test")
		copyFile(t, os.Args[0], bin)
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), envPrintSupported+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if out := run(t, cmd); !strings.Contains(out, "not root") {
			t.Errorf("NodeSupported as nobody does not say it needs root:\n%s", out)
		}
	})

	for _, tc := range []struct {
		name, skip, want string
	}{
		{"GetNode fails", "", "--- FAIL: TestGetNodeHelper"},
		{"GetNode skips", "1", "--- SKIP: TestGetNodeHelper"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestGetNodeHelper$", "-test.v")
			cmd.Env = append(os.Environ(), append(noTools, envHelperMode+"=getnode", testenv.EnvSkipNode+"="+tc.skip)...)
			out := run(t, cmd)
			if !strings.Contains(out, tc.want) || !strings.Contains(out, testenv.EnvKubeBinDir+" is not set") {
				t.Errorf("want %q and the reason; the child said:\n%s", tc.want, out)
			}
			if strings.Contains(out, "got a node") {
				t.Errorf("GetNode returned a node on a machine that cannot run one:\n%s", out)
			}
		})
	}
}

// TestGetNodeHelper is a child of TestNodeSupportedSaysWhy.
func TestGetNodeHelper(t *testing.T) {
	if os.Getenv(envHelperMode) != "getnode" {
		t.Skip("runs only as the child of TestNodeSupportedSaysWhy")
	}
	testenv.GetNode(t)
	t.Log("got a node")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
