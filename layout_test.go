package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The folders show the architecture (CONTRIBUTING.md's Layout): the shared core
// at the top of internal/ (routing, ghostjson, vgwapi, gwruntime, mainvcl,
// gatewaystatus, invalidation), the control plane the provider drives in
// internal/control, Varnish's programs under internal/varnish/, the
// chaperone's parts under chaperone/internal/ (Go lets only the chaperone
// import them), image building under internal/build/ and test
// infrastructure under internal/testing/. TestImportGraph keeps the
// imports one-way, so the folders stay true.

const module = "github.com/varnishgw/terraform-provider-varnishgw"

// layoutGroup is the folder group of a package of this module.
func layoutGroup(pkg string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	switch {
	case rel == "":
		return "provider" // main.go serves the provider
	case strings.HasPrefix(rel, "provider"):
		return "provider"
	case strings.HasPrefix(rel, "chaperone/internal/"):
		return "chaperone-parts"
	case rel == "chaperone" || strings.HasPrefix(rel, "chaperone/"):
		return "chaperone"
	case rel == "internal/control":
		return "control"
	case strings.HasPrefix(rel, "internal/varnish/"):
		return "varnish"
	case strings.HasPrefix(rel, "internal/build/"):
		return "build"
	case strings.HasPrefix(rel, "internal/testing/"):
		return "testing"
	case strings.HasPrefix(rel, "internal/demo"):
		return "demo"
	case strings.HasPrefix(rel, "internal/bench/"):
		return "bench" // benchmark harnesses (make bench-*), never imported by the product
	case strings.HasPrefix(rel, "e2e"):
		return "e2e"
	case strings.HasPrefix(rel, "internal/chaperone/"):
		return "none: the chaperone's parts live under chaperone/internal/, what it shares in the core"
	case strings.HasPrefix(rel, "internal/"):
		return "core"
	}
	return "other:" + rel
}

// allowed lists, per group, the groups its non-test code may import. Tests
// may import more, but no test outside chaperone/ imports the chaperone's
// parts: Go's internal rule refuses it, so what the provider's and the e2e
// tests share with the pods lives in the core (gatewaystatus, invalidation).
var allowed = map[string][]string{
	"core":            {"core"},
	"varnish":         {"varnish", "core"},
	"chaperone-parts": {"chaperone-parts", "varnish", "core"},
	"chaperone":       {"chaperone-parts", "varnish", "core"},
	"control":         {"core"},
	"provider":        {"provider", "control", "core", "varnish"}, // the sidecar container's varnishd command line
	"build":           {"build", "core", "testing"},               // the echo image holds the test backends' server
	"testing":         {"testing", "build", "varnish", "core"},
	"demo":            {"demo", "testing", "build", "varnish", "core"},
	"bench":           {"bench", "testing", "varnish", "core"},
	"e2e":             {"e2e", "demo", "testing", "build", "varnish", "core", "control", "provider"},
}

func TestImportGraph(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, "|")
		from := layoutGroup(pkg)
		ok, known := allowed[from]
		if !known {
			t.Errorf("package %s is in no folder group of the layout (%s): place it, and list it in allowed", pkg, from)
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			if to := layoutGroup(imp); !slices.Contains(ok, to) {
				t.Errorf("%s (%s) imports %s (%s): the %s group may import only %v", pkg, from, imp, to, from, ok)
			}
		}
	}
}

// TestControlHasNoTerraform: the control plane knows nothing of Terraform,
// not even through a package it imports.
func TestControlHasNoTerraform(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./internal/control").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "terraform-plugin") {
			t.Errorf("internal/control depends on %s: the provider turns Terraform into what control takes", dep)
		}
	}
}

// Size limits of the provider's and the control plane's code: the provider
// holds only the Terraform side, and no file grows past what one reads
// through.
const (
	maxFileLines     = 700
	maxProviderLines = 9500
)

func TestFileSizes(t *testing.T) {
	provider := 0
	for _, dir := range []string{"provider", "internal/control"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			n := bytes.Count(b, []byte("\n"))
			if n > maxFileLines {
				t.Errorf("%s has %d lines, more than %d: split it by job", f, n, maxFileLines)
			}
			if dir == "provider" {
				provider += n
			}
		}
	}
	if provider > maxProviderLines {
		t.Errorf("provider/ has %d lines of non-test code, more than %d: move what is not Terraform to internal/control or gwruntime", provider, maxProviderLines)
	}
}

// TestContractsDoNotImportRouting: the runtime contract (gwruntime) and
// varnishgw's API types (vgwapi) stand below the routing pipeline, which
// uses them; internal/routingfragment joins vgwapi and routing.
func TestContractsDoNotImportRouting(t *testing.T) {
	for _, pkg := range []string{"./internal/gwruntime", "./internal/vgwapi"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		if slices.Contains(strings.Fields(string(out)), module+"/internal/routing") {
			t.Errorf("%s depends on internal/routing: move what it needs to a leaf package (object, ghostjson, vclregex)", pkg)
		}
	}
}
