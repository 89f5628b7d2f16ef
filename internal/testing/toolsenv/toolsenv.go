// Package toolsenv gives test binaries the tool paths `make setup` found:
// it reads the repository's bin/tools.env (KEY=value lines written by
// scripts/setup.sh) into the process environment, so plain `go test ./...`
// finds kube-apiserver, etcd, the Terraform CLI and the rest without
// exporting anything by hand, as `make test` does.
//
// A variable already in the environment wins over the file, also when it is
// set to the empty string: that is how a test runs a child without a tool
// (VARNISHGW_KUBE_BIN_DIR= makes a machine that cannot run a node). The file is
// found from the working directory (a test runs in its package's directory)
// by walking up to this module's go.mod, so each checkout or worktree uses
// its own bin/tools.env.
package toolsenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// modulePath is the module whose bin/tools.env is read.
const modulePath = "github.com/varnishgw/terraform-provider-varnishgw"

// File is the path of the tools file under the module root.
const File = "bin/tools.env"

// Fix is what to run when a tool is missing.
const Fix = "run `make setup` (it writes " + File + ", which tests read)"

var (
	once    sync.Once
	loaded  string
	loadErr error
)

// Load sets each variable of bin/tools.env that the environment lacks, once
// per process, and returns the file's path. A missing file is not an error
// (path ""): the variables then come from the environment alone, and what
// needs them says what is missing (see Missing).
func Load() (string, error) {
	once.Do(func() { loaded, loadErr = load() })
	return loaded, loadErr
}

func load() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("toolsenv: working directory: %w", err)
	}
	root, err := moduleRoot(wd)
	if err != nil {
		return "", err
	}
	path := filepath.Join(root, File)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("toolsenv: %w", err)
	}
	vars, err := parse(data)
	if err != nil {
		return "", fmt.Errorf("toolsenv: %s: %w; %s", path, err, Fix)
	}
	for _, kv := range vars {
		if _, set := os.LookupEnv(kv[0]); set {
			continue
		}
		if err := os.Setenv(kv[0], kv[1]); err != nil {
			return "", fmt.Errorf("toolsenv: set %s from %s: %w", kv[0], path, err)
		}
	}
	return path, nil
}

// parse reads KEY=value lines; blank lines and # comments are skipped.
func parse(data []byte) ([][2]string, error) {
	var vars [][2]string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("line %d: %q is not KEY=value", n, line)
		}
		vars = append(vars, [2]string{k, v})
	}
	return vars, sc.Err()
}

// moduleRoot is the nearest directory at or above dir whose go.mod declares
// this module.
func moduleRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("toolsenv: %w", err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && declares(data, modulePath) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("toolsenv: no go.mod of %s at or above %s", modulePath, dir)
		}
	}
}

func declares(gomod []byte, module string) bool {
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == module
		}
	}
	return false
}

// Missing returns an error naming each of keys that is empty after Load,
// with the fix, or nil when all are set.
func Missing(keys ...string) error {
	path, err := Load()
	if err != nil {
		return err
	}
	var missing []string
	for _, k := range keys {
		if os.Getenv(k) == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	where := "no " + File + " in this checkout"
	if path != "" {
		where = path + " does not set them"
	}
	return fmt.Errorf("%s not set (%s): %s", strings.Join(missing, ", "), where, Fix)
}
