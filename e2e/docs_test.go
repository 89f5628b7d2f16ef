package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/tfcli"
)

// snippet is a Terraform code block of a document.
type snippet struct {
	file string
	line int
	hcl  string
}

// terraformSnippets are the ```terraform and ```hcl blocks of a Markdown
// file that declare a varnishgw provider, resource or data source.
func terraformSnippets(t *testing.T, file string) []snippet {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []snippet
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		fence := strings.TrimSpace(lines[i])
		if fence != "```terraform" && fence != "```hcl" {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
		}
		hcl := strings.Join(lines[start:i], "\n")
		if regexp.MustCompile(`(?m)^(resource|data) "varnishgw_|^provider "varnishgw"`).MatchString(hcl) {
			out = append(out, snippet{file, start + 1, hcl})
		}
	}
	return out
}

// undeclared are the errors a snippet may have for being a part of a
// configuration: it refers to a class or gateway declared elsewhere.
var undeclared = regexp.MustCompile(`^Reference to undeclared (resource|input variable|module)$`)

// TestDocSnippetsValidate runs validate on every Terraform snippet of the
// README and of docs/ (the generated provider documentation and its
// guides) that uses varnishgw: each uses the current schema. A snippet
// may refer to resources it does not declare; every other error fails.
func TestDocSnippetsValidate(t *testing.T) {
	files := []string{"../README.md"}
	err := filepath.WalkDir("../docs", func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var snippets []snippet
	for _, f := range files {
		snippets = append(snippets, terraformSnippets(t, f)...)
	}
	if len(snippets) < 15 {
		t.Fatalf("only %d snippets found in %v", len(snippets), files)
	}
	for _, s := range snippets {
		name := strings.TrimPrefix(s.file, "../") + ":" + strconv.Itoa(s.line)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if strings.Contains(s.hcl, `resource "kubernetes_`) {
				t.Skip("uses the kubernetes provider, which validate would download")
			}
			tf, err := tfcli.New(context.Background(), tfcli.Options{Dir: t.TempDir(), ProviderDir: providerDir(t)})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(s.hcl, "required_providers") {
				if err := tf.WriteFile("providers.tf", tfcli.RequiredProviders); err != nil {
					t.Fatal(err)
				}
			}
			if err := tf.WriteFile("main.tf", s.hcl); err != nil {
				t.Fatal(err)
			}
			out, err := tf.Run(context.Background(), "validate", "-no-color")
			if err == nil {
				return
			}
			text := out + err.Error()
			for _, m := range regexp.MustCompile(`(?m)^(?:│ )?Error: (.+)$`).FindAllStringSubmatch(text, -1) {
				if !undeclared.MatchString(strings.TrimSpace(m[1])) {
					t.Fatalf("%s line %d does not validate:\n%s\n%s", s.file, s.line, s.hcl, text)
				}
			}
		})
	}
}
