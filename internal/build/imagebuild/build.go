package imagebuild

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/build/ociimage"
)

// Registry is the registry part of the images' names: they are built and
// imported locally, never pulled from there.
const Registry = "localhost/varnishgw"

// SourceURL is the repository the images are built from (the
// org.opencontainers.image.source annotation).
const SourceURL = "https://github.com/varnishgw/terraform-provider-varnishgw"

// Options of a build.
type Options struct {
	// Repo is the repository's root directory.
	Repo string
	// Out is where the archives and their descriptions go (bin/images).
	Out string
	// Cache is the directory of the cached roots, the private apt lists and
	// the downloaded packages ($VARNISHGW_CACHE/image).
	Cache string
	// NoCache builds the roots afresh in a temporary directory (Check);
	// downloaded packages are still taken from Cache.
	NoCache bool
	// Archive is where the Debian packages come from.
	Archive Archive
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

type builder struct {
	opts     Options
	archive  Archive
	cacheDir string
	work     string
	src      Source
	apt      *privateApt
}

func (b *builder) path(rel string) string { return filepath.Join(b.opts.Repo, rel) }

func (b *builder) logf(format string, args ...any) {
	if b.opts.Log != nil {
		fmt.Fprintf(b.opts.Log, "image: "+format+"\n", args...)
	}
}

// env is the environment of mmdebstrap and the chroot builds.
func (b *builder) env() []string {
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LC_ALL=C.UTF-8",
		"HOME=/root",
		fmt.Sprintf("SOURCE_DATE_EPOCH=%d", b.src.Time.Unix()),
		"TMPDIR=" + b.work,
	}
	for _, k := range []string{"http_proxy", "https_proxy", "no_proxy"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Build builds the gateway and echo images into opts.Out and returns their
// descriptions.
func Build(ctx context.Context, opts Options) ([]Info, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("make image needs root: mmdebstrap installs Debian packages into a root file system (owners, device nodes, chroot); run it as root")
	}
	if opts.Archive.Suite == "" {
		opts.Archive = DefaultArchive()
	}
	b := &builder{opts: opts, archive: opts.Archive, cacheDir: opts.Cache}
	var err error
	if b.src, err = ReadSource(ctx, opts.Repo); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(b.cacheDir, 0o755); err != nil {
		return nil, err
	}
	// One build at a time per cache: roots, lists and downloads are shared.
	lock, err := os.OpenFile(filepath.Join(b.cacheDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b.logf("waiting for another image build using %s", b.cacheDir)
		if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
			return nil, fmt.Errorf("lock %s: %w", b.cacheDir, err)
		}
	}
	if b.work, err = os.MkdirTemp(b.cacheDir, "work-"); err != nil {
		return nil, err
	}
	defer func() {
		if err := removeTree(b.work); err != nil {
			b.logf("remove the work directory: %v", err)
		}
	}()
	// Work directories of builds that were killed.
	stale, _ := filepath.Glob(filepath.Join(b.cacheDir, "work-*"))
	for _, s := range stale {
		if s != b.work {
			if err := removeTree(s); err != nil {
				b.logf("remove a killed build's work directory: %v", err)
			}
		}
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, err
	}
	b.logf("version %s (revision %s, SOURCE_DATE_EPOCH %d = %s)", b.src.Version, b.src.Revision, b.src.Time.Unix(), b.src.Time.Format(time.RFC3339))

	gw, err := b.gateway(ctx)
	if err != nil {
		return nil, err
	}
	echo, err := b.echo(ctx)
	if err != nil {
		return nil, err
	}
	return []Info{gw, echo}, nil
}

func (b *builder) gateway(ctx context.Context) (Info, error) {
	pins, err := ReadPins(b.path(Varnish77PackagesFile))
	if err != nil {
		return Info{}, err
	}
	pkgs, err := ReadPackages(b.path(GatewayPackagesFile))
	if err != nil {
		return Info{}, err
	}
	buildPkgs, err := ReadPackages(b.path(GhostBuildPackagesFile))
	if err != nil {
		return Info{}, err
	}
	runtime := rootSpec{
		name:    "gateway",
		include: pin(pkgs, pins),
		customize: []string{
			`install -D -m 0644 ` + b.path(SysusersFile) + ` "$1"` + SysusersPath,
			`chroot "$1" systemd-sysusers ` + SysusersPath,
			fmt.Sprintf(`install -d -o %d -g %d -m 0755 "$1"%s`, UID, GID, HomeDir),
			`install -d -m 1777 "$1"/tmp`,
			`install -m 0644 ` + b.path(DpkgExcludesFile) + ` "$1"` + DpkgConfigPath,
		},
		// apt ran outside the root and is not in the image: its
		// directories go, and so do dpkg's and debconf's backups.
		remove: []string{"/etc/apt", "/var/lib/apt", "/var/cache/apt", "/var/log/apt", "/var/lib/dpkg/*-old", "/var/cache/debconf/*-old"},
		files:  []string{SysusersFile},
	}
	buildRoot := rootSpec{name: "ghost-build", include: pin(buildPkgs, pins)}

	rootDir, err := b.root(ctx, runtime)
	if err != nil {
		return Info{}, err
	}
	rootPkgs, err := installed(ctx, rootDir)
	if err != nil {
		return Info{}, err
	}
	buildDir, err := b.root(ctx, buildRoot)
	if err != nil {
		return Info{}, err
	}
	buildRootPkgs, err := installed(ctx, buildDir)
	if err != nil {
		return Info{}, err
	}
	varnish, err := checkVarnish(rootPkgs, buildRootPkgs, pins)
	if err != nil {
		return Info{}, err
	}
	ghost, err := b.buildGhost(ctx, buildDir)
	if err != nil {
		return Info{}, err
	}
	chaperone, err := b.goBuild(ctx, "./chaperone", "chaperone")
	if err != nil {
		return Info{}, err
	}

	list, err := dpkgList(ctx, rootDir)
	if err != nil {
		return Info{}, err
	}
	name := Registry + "/gateway:" + b.src.Version
	sbom, err := b.sbom(name, rootPkgs, map[string]string{ChaperonePath: chaperone}, varnish)
	if err != nil {
		return Info{}, err
	}
	img := ociimage.Image{
		Name:    name,
		Created: b.src.Time,
		Layers: []ociimage.Layer{
			ociimage.DirLayer(rootDir, fmt.Sprintf("Debian 13 (%s): %s and their dependencies; user varnishgw", b.archive.Suite, strings.Join(pkgs, ", "))),
			ociimage.FilesLayer("ghost VMOD built against libvarnishapi-dev "+varnish,
				ociimage.File{Path: GhostPath, Source: ghost, Mode: 0o644}),
			ociimage.FilesLayer("chaperone; package list and SBOM",
				ociimage.File{Path: ChaperonePath, Source: chaperone, Mode: 0o755},
				ociimage.File{Path: PackagesPath, Data: list, Mode: 0o644},
				ociimage.File{Path: SBOMPath, Data: sbom, Mode: 0o644}),
		},
		Config: v1.Config{
			User:       User,
			Entrypoint: []string{ChaperonePath},
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			WorkingDir: HomeDir,
			Labels:     b.annotations("gateway", "varnishgw gateway: the chaperone, varnishd "+varnish+" and the ghost VMOD"),
		},
		Annotations: b.annotations("gateway", "varnishgw gateway: the chaperone, varnishd "+varnish+" and the ghost VMOD"),
	}
	return b.write("gateway", img, list, sbom, varnish)
}

func (b *builder) echo(ctx context.Context) (Info, error) {
	bin, err := b.goBuild(ctx, "./internal/demo/cmd/echo-backend", "echo-backend")
	if err != nil {
		return Info{}, err
	}
	name := Registry + "/echo:" + b.src.Version
	sbom, err := b.sbom(name, nil, map[string]string{EchoPath: bin}, "")
	if err != nil {
		return Info{}, err
	}
	list := []byte("# no Debian packages: " + EchoPath + " (static Go) alone\n")
	desc := "varnishgw echo backend for tests: answers with its pod name and the request"
	img := ociimage.Image{
		Name:    name,
		Created: b.src.Time,
		Layers: []ociimage.Layer{ociimage.FilesLayer("echo-backend",
			ociimage.File{Path: EchoPath, Source: bin, Mode: 0o755},
			ociimage.File{Path: "/tmp", Mode: os.ModeDir | os.ModeSticky | 0o777},
			ociimage.File{Path: SBOMPath, Data: sbom, Mode: 0o644})},
		Config: v1.Config{
			User:         User,
			Entrypoint:   []string{EchoPath},
			Cmd:          []string{"-listen", ":8080"},
			ExposedPorts: map[string]struct{}{"8080/tcp": {}},
			Labels:       b.annotations("echo", desc),
		},
		Annotations: b.annotations("echo", desc),
	}
	return b.write("echo", img, list, sbom, "")
}

func (b *builder) annotations(name, description string) map[string]string {
	return map[string]string{
		ociimage.AnnotationSource:              SourceURL,
		ociimage.AnnotationRevision:            b.src.Revision,
		ociimage.AnnotationVersion:             b.src.Version,
		ociimage.AnnotationTitle:               "varnishgw " + name,
		"org.opencontainers.image.description": description,
	}
}

// write writes the archive and its description files.
func (b *builder) write(name string, img ociimage.Image, list, sbom []byte, varnish string) (Info, error) {
	archive := filepath.Join(b.opts.Out, name+".tar")
	start := time.Now()
	res, err := ociimage.WriteFile(archive, img)
	if err != nil {
		return Info{}, err
	}
	info := Info{
		Name:           img.Name,
		Repository:     strings.TrimSuffix(img.Name, ":"+b.src.Version),
		Tag:            b.src.Version,
		Digest:         res.Digest,
		Revision:       b.src.Revision,
		Created:        b.src.Time,
		Archive:        name + ".tar",
		Size:           res.Size,
		CompressedSize: res.CompressedSize,
		Packages:       name + ".packages.txt",
		SBOM:           name + ".cdx.json",
		Varnish:        varnish,
	}
	for file, data := range map[string][]byte{info.Packages: list, info.SBOM: sbom} {
		if err := os.WriteFile(filepath.Join(b.opts.Out, file), data, 0o644); err != nil {
			return Info{}, err
		}
	}
	if err := info.write(b.opts.Out, name); err != nil {
		return Info{}, err
	}
	b.logf("%s %s: %s, %.1f MB uncompressed, %.1f MB compressed (written in %s)", archive, img.Name, res.Digest,
		float64(res.Size)/1e6, float64(res.CompressedSize)/1e6, time.Since(start).Round(100*time.Millisecond))
	return info, nil
}

// pin appends "=version" to the packages that pins fixes.
func pin(pkgs []string, pins map[string]string) []string {
	out := make([]string, len(pkgs))
	for i, p := range pkgs {
		out[i] = p
		if v, ok := pins[p]; ok {
			out[i] = p + "=" + v
		}
	}
	return out
}

// checkVarnish verifies that the image and the ghost build root hold the
// same varnish, the one ghost's tests run against (the exact pins), and
// returns its version.
func checkVarnish(image, build []Package, pins map[string]string) (string, error) {
	version := func(pkgs []Package, name string) string {
		for _, p := range pkgs {
			if p.Name == name {
				return p.Version
			}
		}
		return ""
	}
	v := version(image, "varnish")
	if v == "" {
		return "", fmt.Errorf("the gateway root has no varnish package: check %s", GatewayPackagesFile)
	}
	if bv := version(build, "varnish"); bv != v {
		return "", fmt.Errorf("ghost's build root has varnish %q, the gateway root %q: the archive changed between the two; run make image again", bv, v)
	}
	names := make([]string, 0, len(pins))
	for n := range pins {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, pkgs := range [][]Package{image, build} {
			if got := version(pkgs, n); got != "" && got != pins[n] {
				return "", fmt.Errorf("%s %s is in the image's roots, but %s pins %s (ghost's Varnish 7.7 tests run against it): update %s", n, got, Varnish77PackagesFile, pins[n], Varnish77PackagesFile)
			}
		}
	}
	return v, nil
}

// buildGhost compiles ghost in the build root (chroot, as root: the build
// root is a throwaway) from the work tree's ghost/ files and returns the
// library's path. The result is cached by the root and the sources.
func (b *builder) buildGhost(ctx context.Context, root string) (string, error) {
	files, err := b.gitFiles(ctx, "ghost")
	if err != nil {
		return "", err
	}
	src := filepath.Join(root, "src")
	if err := removeTree(src); err != nil {
		return "", err
	}
	for _, f := range files {
		fi, err := os.Stat(b.path(f))
		if err != nil {
			return "", err
		}
		if err := copyFile(filepath.Join(src, f), b.path(f), fi.Mode().Perm()); err != nil {
			return "", fmt.Errorf("copy %s into ghost's build root: %w", f, err)
		}
	}
	defer func() { _ = removeTree(src) }() // inside b.work, which the build removes
	start := time.Now()
	cmd := exec.CommandContext(ctx, "chroot", root, "/usr/bin/env", "-i",
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C.UTF-8", "HOME=/nonexistent",
		fmt.Sprintf("SOURCE_DATE_EPOCH=%d", b.src.Time.Unix()),
		"make", "-C", "/src/ghost", "all")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build ghost in its Debian %s build root: %w:\n%s", b.archive.Suite, err, lastLines(string(out), 30))
	}
	out := filepath.Join(b.work, "libvmod_ghost.so")
	if err := copyFile(out, filepath.Join(src, "ghost/libvmod_ghost.so"), 0o644); err != nil {
		return "", err
	}
	b.logf("ghost built against the build root's varnish in %s", time.Since(start).Round(100*time.Millisecond))
	return out, nil
}

// gitFiles lists the files under dir that git tracks or would track
// (untracked files that are not ignored): what a clean clone plus the
// work tree's changes hold.
func (b *builder) gitFiles(ctx context.Context, dir string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "git", "ls-files", "-co", "--exclude-standard", "--", dir)
	cmd.Dir = b.opts.Repo
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files %s: %w", dir, err)
	}
	var files []string
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f == "" {
			continue
		}
		if _, err := os.Stat(b.path(f)); err == nil { // deleted but not yet committed
			files = append(files, f)
		}
	}
	return files, nil
}

// goBuild builds a static Go binary of pkg (CGO_ENABLED=0, -trimpath).
func (b *builder) goBuild(ctx context.Context, pkg, name string) (string, error) {
	out := filepath.Join(b.work, name)
	gobin := os.Getenv("GO")
	if gobin == "" {
		gobin = "go"
	}
	start := time.Now()
	defer func() { b.logf("go build %s in %s", pkg, time.Since(start).Round(100*time.Millisecond)) }()
	// The binaries report the version the image is tagged with.
	ldflags := "-X github.com/varnishgw/terraform-provider-varnishgw/internal/version.Version=" + b.src.Version
	cmd := exec.CommandContext(ctx, gobin, "build", "-trimpath", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Dir = b.opts.Repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=-mod=readonly")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w:\n%s", pkg, err, msg)
	}
	return out, nil
}
