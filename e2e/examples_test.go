package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/tfcli"
)

// TestExamplesValidate runs `validate` of the CLI on every directory under
// examples/ that holds *.tf files, with the provider built from this
// repository: every example a user copies is valid for the provider. The
// examples of actions need Terraform 1.14 (VARNISHGW_TERRAFORM_NEW_PATH,
// which make test's setup builds); without it they are skipped with a
// message.
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
			opts := tfcli.Options{Dir: t.TempDir(), ProviderDir: providerDir(t)}
			if strings.HasPrefix(dir, "../examples/actions/") {
				bin := os.Getenv("VARNISHGW_TERRAFORM_NEW_PATH")
				if bin == "" {
					t.Skip("actions need Terraform 1.14: run VARNISHGW_TERRAFORM_NEW=1 make setup (VARNISHGW_TERRAFORM_NEW_PATH is empty)")
				}
				opts.CLI = &tfcli.CLI{Path: bin}
			}
			tf, err := tfcli.New(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
			declared := false
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				declared = declared || strings.Contains(string(b), "required_providers")
				if err := tf.WriteFile(filepath.Base(f), string(b)); err != nil {
					t.Fatal(err)
				}
			}
			if !declared {
				if err := tf.WriteFile("zz_providers.tf", tfcli.RequiredProviders); err != nil {
					t.Fatal(err)
				}
			}
			if out, err := tf.Run(context.Background(), "validate", "-no-color"); err != nil {
				t.Fatalf("%v\n%s", err, out)
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
