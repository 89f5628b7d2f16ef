package imagebuild

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/build/ociimage"
)

// dockerfile is the parsed Dockerfile: its stages by name ("" for the
// last, the image).
func dockerfile(t *testing.T) map[string]instructions.Stage {
	t.Helper()
	f, err := os.Open("../../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ast, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("parse Dockerfile: %v", err)
	}
	stages, _, err := instructions.Parse(ast.AST, nil)
	if err != nil {
		t.Fatalf("parse Dockerfile: %v", err)
	}
	byName := map[string]instructions.Stage{}
	for i, s := range stages {
		if i == len(stages)-1 {
			byName[""] = s
		} else {
			byName[s.Name] = s
		}
	}
	return byName
}

// runs are the stage's RUN command lines.
func runs(s instructions.Stage) []string {
	var out []string
	for _, c := range s.Commands {
		if r, ok := c.(*instructions.RunCommand); ok {
			out = append(out, strings.Join(r.CmdLine, " "))
		}
	}
	return out
}

// copies are the stage's COPY commands: destination to the command.
func copies(s instructions.Stage) map[string]*instructions.CopyCommand {
	out := map[string]*instructions.CopyCommand{}
	for _, c := range s.Commands {
		if cp, ok := c.(*instructions.CopyCommand); ok {
			out[cp.DestPath] = cp
		}
	}
	return out
}

// installsFrom checks that stage copies list (a file of image/) into the
// build and runs apt-get install on its lines: the Dockerfile installs the
// very list make image does.
func installsFrom(t *testing.T, s instructions.Stage, list string) {
	t.Helper()
	var dest string
	for d, cp := range copies(s) {
		if cp.From == "" && slices.Equal(cp.SourcePaths, []string{list}) {
			dest = d
		}
	}
	if dest == "" {
		t.Errorf("stage %q does not COPY %s", s.Name, list)
		return
	}
	for _, r := range runs(s) {
		if strings.Contains(r, dest) && strings.Contains(r, "apt-get install") && strings.Contains(r, "--no-install-recommends") {
			return
		}
	}
	t.Errorf("stage %q copies %s to %s but no RUN installs its packages (apt-get install --no-install-recommends)", s.Name, list, dest)
}

// TestDockerfile checks that the Dockerfile builds what make image builds:
// Debian 13 everywhere, the same package lists and dpkg excludes, the same
// user, and the same files at the same paths.
func TestDockerfile(t *testing.T) {
	stages := dockerfile(t)
	img, ok := stages[""]
	if !ok {
		t.Fatal("no stages")
	}
	for name, s := range stages {
		if !strings.Contains(s.BaseName, "trixie") {
			t.Errorf("stage %q is FROM %s: the image is Debian 13 (trixie), as make image builds it", name, s.BaseName)
		}
	}
	installsFrom(t, img, GatewayPackagesFile)
	ghostStage := stages["ghost"]
	installsFrom(t, ghostStage, GhostBuildPackagesFile)
	if !slices.ContainsFunc(runs(ghostStage), func(r string) bool { return strings.Contains(r, "make -C ghost all") }) {
		t.Error("the ghost stage does not run make -C ghost all")
	}
	if !slices.ContainsFunc(runs(stages["chaperone"]), func(r string) bool {
		return strings.Contains(r, "CGO_ENABLED=0 go build -trimpath") && strings.HasSuffix(r, "./chaperone")
	}) {
		t.Error("the chaperone stage does not build ./chaperone as make image does (CGO_ENABLED=0 go build -trimpath)")
	}

	cps := copies(img)
	for dest, want := range map[string]struct{ from, src string }{
		DpkgConfigPath: {"", DpkgExcludesFile},
		SysusersPath:   {"", SysusersFile},
		GhostPath:      {"ghost", "/src/ghost/libvmod_ghost.so"},
		ChaperonePath:  {"chaperone", "/out/chaperone"},
	} {
		cp, ok := cps[dest]
		if !ok || cp.From != want.from || !slices.Equal(cp.SourcePaths, []string{want.src}) {
			t.Errorf("the image does not COPY %s (from stage %q) to %s", want.src, want.from, dest)
		}
	}
	// The dpkg excludes must be in place before the packages are installed.
	order := func(dest string) int {
		for i, c := range img.Commands {
			if cp, ok := c.(*instructions.CopyCommand); ok && cp.DestPath == dest {
				return i
			}
		}
		return -1
	}
	firstInstall := slices.IndexFunc(img.Commands, func(c instructions.Command) bool {
		r, ok := c.(*instructions.RunCommand)
		return ok && strings.Contains(strings.Join(r.CmdLine, " "), "apt-get install")
	})
	if order(DpkgConfigPath) > firstInstall {
		t.Error("the dpkg excludes are copied after apt-get install: they would exclude nothing")
	}
	for _, want := range []string{
		"systemd-sysusers " + SysusersPath,
		"install -d -o 65532 -g 65532 -m 0755 " + HomeDir,
		"dpkg -l > " + PackagesPath,
	} {
		if !slices.ContainsFunc(runs(img), func(r string) bool { return strings.Contains(r, want) }) {
			t.Errorf("no RUN in the image stage does %q", want)
		}
	}
	var user, workdir string
	var entrypoint []string
	for _, c := range img.Commands {
		switch c := c.(type) {
		case *instructions.UserCommand:
			user = c.User
		case *instructions.WorkdirCommand:
			workdir = c.Path
		case *instructions.EntrypointCommand:
			if c.PrependShell {
				t.Error("ENTRYPOINT is in shell form; make image's is exec form")
			}
			entrypoint = c.CmdLine
		}
	}
	if user != User || workdir != HomeDir || !slices.Equal(entrypoint, []string{ChaperonePath}) {
		t.Errorf("USER %q WORKDIR %q ENTRYPOINT %q; make image: %q %q %q", user, workdir, entrypoint, User, HomeDir, []string{ChaperonePath})
	}
}

// TestDockerfileCoversImage checks the other way round, on the image make
// image built (when bin/images has one): every file make image adds on top
// of Debian's packages has its line in the Dockerfile.
func TestDockerfileCoversImage(t *testing.T) {
	dir := os.Getenv("VARNISHGW_IMAGES")
	if dir == "" {
		dir = "../../../bin/images"
	}
	info, err := ReadInfo(dir, "gateway")
	if err != nil {
		t.Skipf("no gateway image to compare with (%v)", err)
	}
	img, err := ociimage.ReadArchive(info.ArchivePath(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	stages := dockerfile(t)
	cps := copies(stages[""])
	runText := strings.Join(runs(stages[""]), "\n")
	// Layers above the Debian root: ghost, the chaperone, the package list and SBOM.
	for _, l := range layers[1:] {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			p := "/" + strings.TrimSuffix(h.Name, "/")
			if h.Typeflag != tar.TypeReg || p == SBOMPath {
				continue
			}
			if _, ok := cps[p]; !ok && !strings.Contains(runText, "> "+p) {
				t.Errorf("make image puts %s in the image; the Dockerfile does not", p)
			}
		}
		rc.Close()
	}
	// In the Debian root: the files make image's hooks add.
	for _, p := range []string{SysusersPath, DpkgConfigPath} {
		if _, ok := cps[p]; !ok {
			t.Errorf("make image installs %s; the Dockerfile does not", p)
		}
	}
	if !strings.Contains(runText, HomeDir) {
		t.Errorf("make image makes %s; the Dockerfile does not", filepath.Clean(HomeDir))
	}
}
