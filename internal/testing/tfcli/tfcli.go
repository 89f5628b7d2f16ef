// Package tfcli runs the real terraform or tofu CLI against the provider
// built from this repository, for tests, benchmarks and the demo.
//
// A Workspace is a working directory with a CLI configuration whose
// dev_overrides point the provider address (registry.terraform.io and
// registry.opentofu.org, varnishgw/varnishgw) at a binary that
// [BuildProvider] builds once per process with go build. Configurations
// must declare the provider's source, for example with [RequiredProviders].
// The Kubernetes connection goes through the provider block or KUBE_*
// variables in Options.Env.
//
//	ws, err := tfcli.New(ctx, tfcli.Options{Dir: dir, Env: []string{"KUBE_CONFIG_PATH=" + kubeconfig}})
//	err = ws.WriteFile("main.tf", tfcli.RequiredProviders+config)
//	err = ws.Apply(ctx, "-parallelism=10")
//	changed, err := ws.Plan(ctx)
//
// The CLI is chosen as the acceptance tests choose it: TF_ACC_TERRAFORM_PATH,
// then VARNISHGW_TERRAFORM, then VARNISHGW_TOFU_PATH, then terraform and
// tofu on PATH ([FindCLI]).
package tfcli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/toolsenv"
)

// ProviderBinary is the file name of the built provider.
const ProviderBinary = "terraform-provider-varnishgw"

// RequiredProviders declares the provider's source; its registry host is the
// CLI's default (registry.terraform.io or registry.opentofu.org), which the
// Workspace's dev_overrides both cover.
const RequiredProviders = `terraform {
  required_providers {
    varnishgw = {
      source = "varnishgw/varnishgw"
    }
  }
}
`

// KubeconfigProvider is RequiredProviders, a variable kubeconfig and the
// provider configured from it: the head of a test configuration whose runs
// pass -var kubeconfig=PATH.
const KubeconfigProvider = RequiredProviders + `
variable "kubeconfig" { type = string }

provider "varnishgw" {
  config_path = var.kubeconfig
}
`

// providerAddresses are the addresses the dev_overrides cover.
var providerAddresses = []string{
	"registry.terraform.io/varnishgw/varnishgw",
	"registry.opentofu.org/varnishgw/varnishgw",
}

// CLI is a terraform or tofu executable.
type CLI struct {
	Path string
	// Tofu is true for OpenTofu.
	Tofu bool
}

func (c CLI) String() string {
	if c.Tofu {
		return "tofu (" + c.Path + ")"
	}
	return "terraform (" + c.Path + ")"
}

// FindCLI returns the CLI named by TF_ACC_TERRAFORM_PATH, VARNISHGW_TERRAFORM
// or VARNISHGW_TOFU_PATH (the first one set), else terraform or tofu on PATH.
// Whether it is OpenTofu is read from its version output.
func FindCLI(ctx context.Context) (CLI, error) {
	if _, err := toolsenv.Load(); err != nil {
		return CLI{}, err
	}
	path := ""
	for _, env := range []string{"TF_ACC_TERRAFORM_PATH", "VARNISHGW_TERRAFORM", "VARNISHGW_TOFU_PATH"} {
		if v := os.Getenv(env); v != "" {
			path = v
			break
		}
	}
	if path == "" {
		for _, name := range []string{"terraform", "tofu"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		return CLI{}, errors.New("no terraform or tofu CLI: set TF_ACC_TERRAFORM_PATH (or VARNISHGW_TERRAFORM / VARNISHGW_TOFU_PATH) or " + toolsenv.Fix)
	}
	out, err := exec.CommandContext(ctx, path, "version").Output()
	if err != nil {
		return CLI{}, fmt.Errorf("run %s version: %w", path, err)
	}
	return CLI{Path: path, Tofu: bytes.Contains(out, []byte("OpenTofu"))}, nil
}

var build struct {
	sync.Mutex
	dir string
}

// BuildProvider builds the provider of the module that contains the current
// directory with go build, once per process, and returns the directory that
// holds ProviderBinary. The binary goes to a fixed per-module place in the
// user cache directory (replaced atomically), so repeated runs leave nothing
// behind and concurrent processes do not disturb each other.
func BuildProvider(ctx context.Context) (string, error) {
	build.Lock()
	defer build.Unlock()
	if build.dir != "" {
		return build.dir, nil
	}
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the module root (go env GOMOD): %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if root == "." || root == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		return "", errors.New("build the provider: the current directory is not inside the varnishgw module")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "varnishgw", "tfcli", strings.NewReplacer("/", "_", ":", "_").Replace(strings.Trim(root, "/")))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build the provider: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".build-*")
	if err != nil {
		return "", fmt.Errorf("build the provider: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp.Name(), ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build the provider in %s: %w\n%s", root, err, out)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, ProviderBinary)); err != nil {
		return "", fmt.Errorf("install the built provider: %w", err)
	}
	build.dir = dir
	return dir, nil
}

// BuildProviderAt builds the provider of the git revision rev (a commit of
// the repository that holds the current directory), for tests of upgrades
// from an older provider, and returns the directory that holds
// ProviderBinary. The source comes from git archive; the binary is cached
// per commit in the user cache directory, so only the first call builds.
func BuildProviderAt(ctx context.Context, rev string) (string, error) {
	commit, err := exec.CommandContext(ctx, "git", "rev-parse", "--verify", rev+"^{commit}").Output()
	if err != nil {
		return "", fmt.Errorf("find the commit %s (git rev-parse; the repository's history is needed): %w", rev, err)
	}
	sha := strings.TrimSpace(string(commit))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "varnishgw", "tfcli", "provider-"+sha)
	if _, err := os.Stat(filepath.Join(dir, ProviderBinary)); err == nil {
		return dir, nil
	}
	src, err := os.MkdirTemp("", "varnishgw-provider-"+sha[:12]+"-")
	if err != nil {
		return "", fmt.Errorf("build the provider of %s: %w", rev, err)
	}
	defer os.RemoveAll(src)
	top, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("find the repository of %s: %w", rev, err)
	}
	// From the top: in a subdirectory, git archive archives only that.
	archive := exec.CommandContext(ctx, "git", "archive", "--format=tar", sha)
	archive.Dir = strings.TrimSpace(string(top))
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", err
	}
	untar.Stdin = pipe
	var stderr bytes.Buffer
	archive.Stderr, untar.Stderr = &stderr, &stderr
	if err := untar.Start(); err != nil {
		return "", fmt.Errorf("extract %s: %w", rev, err)
	}
	if err := archive.Run(); err != nil {
		return "", fmt.Errorf("git archive %s: %w\n%s", rev, err, stderr.String())
	}
	if err := untar.Wait(); err != nil {
		return "", fmt.Errorf("extract %s: %w\n%s", rev, err, stderr.String())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, ".build-*")
	if err != nil {
		return "", err
	}
	f.Close()
	defer os.Remove(f.Name())
	build := exec.CommandContext(ctx, "go", "build", "-o", f.Name(), ".")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build the provider of %s: %w\n%s", rev, err, out)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, ProviderBinary)); err != nil {
		return "", fmt.Errorf("install the provider of %s: %w", rev, err)
	}
	return dir, nil
}

// Options configure a Workspace.
type Options struct {
	// Dir is the working directory (it must exist): the configuration,
	// state and the CLI configuration file go there.
	Dir string
	// CLI defaults to FindCLI.
	CLI *CLI
	// ProviderDir holds ProviderBinary; it defaults to BuildProvider.
	ProviderDir string
	// Env is added to the CLI's environment (the process environment),
	// for example KUBE_CONFIG_PATH=... or TF_LOG=debug.
	Env []string
	// Log, when set, receives the CLI's output as it runs (t.Output() in
	// tests, os.Stderr in programs).
	Log io.Writer
}

// Workspace runs CLI commands in one working directory.
type Workspace struct {
	Dir string
	CLI CLI
	env []string
	log io.Writer
}

// New prepares a Workspace: it finds the CLI, builds the provider and
// writes the CLI configuration file.
func New(ctx context.Context, opts Options) (*Workspace, error) {
	if opts.Dir == "" {
		return nil, errors.New("tfcli: Options.Dir is required")
	}
	ws := &Workspace{Dir: opts.Dir, log: opts.Log}
	if opts.CLI != nil {
		ws.CLI = *opts.CLI
	} else {
		cli, err := FindCLI(ctx)
		if err != nil {
			return nil, err
		}
		ws.CLI = cli
	}
	pdir := opts.ProviderDir
	if pdir == "" {
		var err error
		if pdir, err = BuildProvider(ctx); err != nil {
			return nil, err
		}
	}
	var cfg strings.Builder
	cfg.WriteString("provider_installation {\n  dev_overrides {\n")
	for _, a := range providerAddresses {
		fmt.Fprintf(&cfg, "    %q = %q\n", a, pdir)
	}
	cfg.WriteString("  }\n  direct {}\n}\n")
	rc := filepath.Join(opts.Dir, ".tfcli.tfrc")
	if err := os.WriteFile(rc, []byte(cfg.String()), 0o644); err != nil {
		return nil, fmt.Errorf("write the CLI configuration: %w", err)
	}
	ws.env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_INPUT=0")
	ws.env = append(ws.env, opts.Env...)
	return ws, nil
}

// WriteFile writes a file (a configuration, a .tfvars) into the workspace.
func (w *Workspace) WriteFile(name, content string) error {
	if err := os.WriteFile(filepath.Join(w.Dir, name), []byte(content), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// ExitError is a CLI command that exited with a non-zero status.
type ExitError struct {
	Args   []string
	Code   int
	Stderr string
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("%s exited with status %d:\n%s", strings.Join(e.Args, " "), e.Code, e.Stderr)
}

// Run runs the CLI with args and returns its standard output. A non-zero
// exit is an *ExitError carrying the standard error.
func (w *Workspace) Run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, w.CLI.Path, args...)
	cmd.Dir = w.Dir
	cmd.Env = w.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if w.log != nil {
		cmd.Stdout = io.MultiWriter(&stdout, w.log)
		cmd.Stderr = io.MultiWriter(&stderr, w.log)
	}
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return stdout.String(), &ExitError{Args: append([]string{filepath.Base(w.CLI.Path)}, args...), Code: exit.ExitCode(), Stderr: stderr.String()}
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("run %s: %w", w.CLI.Path, err)
	}
	return stdout.String(), nil
}

// Init runs init. Configurations whose only provider is varnishgw need no
// init (dev_overrides replace it) and should not call it: init still asks
// the registry for varnishgw/varnishgw and fails (measured with Terraform
// 1.11 and OpenTofu 1.10). It is here for configurations with modules or
// other providers, where the registry must be reachable.
func (w *Workspace) Init(ctx context.Context, args ...string) error {
	_, err := w.Run(ctx, append([]string{"init", "-input=false", "-no-color"}, args...)...)
	return err
}

// Apply runs apply -auto-approve with extra args such as -parallelism=10.
func (w *Workspace) Apply(ctx context.Context, args ...string) error {
	_, err := w.Run(ctx, append([]string{"apply", "-auto-approve", "-input=false", "-no-color"}, args...)...)
	return err
}

// Plan runs plan -detailed-exitcode and reports whether it found changes.
func (w *Workspace) Plan(ctx context.Context, args ...string) (changes bool, err error) {
	out, err := w.Run(ctx, append([]string{"plan", "-detailed-exitcode", "-input=false", "-no-color"}, args...)...)
	var exit *ExitError
	if errors.As(err, &exit) && exit.Code == 2 {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w\n%s", err, out)
	}
	return false, nil
}

// Destroy runs destroy -auto-approve with extra args.
func (w *Workspace) Destroy(ctx context.Context, args ...string) error {
	_, err := w.Run(ctx, append([]string{"destroy", "-auto-approve", "-input=false", "-no-color"}, args...)...)
	return err
}

// Output decodes the root module output name (output -json) into v.
func (w *Workspace) Output(ctx context.Context, name string, v any) error {
	out, err := w.Run(ctx, "output", "-json", name)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("decode output %s: %w", name, err)
	}
	return nil
}
