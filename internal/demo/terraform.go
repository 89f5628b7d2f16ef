package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// Terraform runs the terraform (or tofu) CLI on a copy of a configuration
// with this repository's provider binary through dev_overrides, so no
// registry is needed.
type Terraform struct {
	Bin string // the CLI
	Dir string // the configuration's copy, where the state lives
	env []string
}

// NewTerraform copies the *.tf files of example into work/tf and prepares
// a CLI configuration that takes the provider from providerDir. The CLI is
// VARNISHGW_TERRAFORM (written by make setup) or terraform or tofu on PATH.
func NewTerraform(work, providerDir, example string) (*Terraform, error) {
	bin := os.Getenv("VARNISHGW_TERRAFORM")
	if bin == "" {
		for _, name := range []string{"terraform", "tofu"} {
			if p, err := exec.LookPath(name); err == nil {
				bin = p
				break
			}
		}
	}
	if bin == "" {
		return nil, fmt.Errorf("no terraform or tofu CLI: run make setup")
	}
	dir := filepath.Join(work, "tf")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(example, "*.tf"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no *.tf files in %s", example)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			return nil, err
		}
	}
	rc := filepath.Join(work, "terraformrc")
	conf := fmt.Sprintf(`provider_installation {
  dev_overrides {
    "registry.terraform.io/varnishgw/varnishgw" = %[1]q
    "registry.opentofu.org/varnishgw/varnishgw" = %[1]q
  }
  direct {}
}
`, providerDir)
	if err := os.WriteFile(rc, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	return &Terraform{Bin: bin, Dir: dir, env: append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")}, nil
}

// Run runs the CLI with args in the configuration's directory.
func (t *Terraform) Run(ctx context.Context, out io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, t.Bin, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = t.Dir, t.env, out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", filepath.Base(t.Bin), args[0], err)
	}
	return nil
}
