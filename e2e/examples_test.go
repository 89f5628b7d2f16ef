package e2e

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
)

// providersTF declares the provider for examples that show a single
// resource and therefore do not declare it themselves.
const providersTF = `terraform {
  required_providers {
    varnishgw = { source = "varnishgw/varnishgw" }
  }
}
`

// TestExamplesValidate runs `validate` of the CLI on every directory under
// examples/ that holds *.tf files, with the provider built from this
// repository: every example a user copies is valid for the provider.
func TestExamplesValidate(t *testing.T) {
	var dirs []string
	err := filepath.WalkDir("../examples", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".tf") && !contains(dirs, filepath.Dir(path)) {
			dirs = append(dirs, filepath.Dir(path))
		}
		return err
	})
	if err != nil || len(dirs) < 3 {
		t.Fatalf("examples: %v %v", dirs, err)
	}
	for _, dir := range dirs {
		t.Run(strings.TrimPrefix(dir, "../examples/"), func(t *testing.T) {
			t.Parallel()
			tf, err := demo.NewTerraform(t.TempDir(), providerDir(t), dir)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(filepath.Join(dir, "main.tf"))
			if !strings.Contains(string(b), "required_providers") {
				if err := os.WriteFile(filepath.Join(tf.Dir, "zz_providers.tf"), []byte(providersTF), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var out strings.Builder
			if err := tf.Run(context.Background(), io.MultiWriter(&out), "validate", "-no-color"); err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
		})
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
