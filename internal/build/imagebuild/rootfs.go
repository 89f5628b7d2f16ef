package imagebuild

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// rootSpec is a Debian root file system to build with mmdebstrap.
type rootSpec struct {
	// name names the root in the cache and in messages: "gateway".
	name string
	// include are the packages beyond the Essential set, apt style
	// ("name" or "name=version").
	include []string
	// customize are shell commands run after the packages are installed,
	// with the root as "$1" (mmdebstrap --customize-hook).
	customize []string
	// files are extra inputs the customize hooks read: they are part of
	// the cache key.
	files []string
	// remove are paths (globs) in the root removed once mmdebstrap is done
	// (it still needs some of them during its own cleanup).
	remove []string
}

// mmdebstrapArgs are the options of every root: the Essential packages
// plus the includes, dpkg path excludes, no apt in the result (apt runs
// outside), downloads kept in debs/ between builds, and no file that
// depends on the build machine (resolv.conf, hostname). dpkg's fsyncs are
// off while building (force-unsafe-io), and that setting is removed again.
func mmdebstrapArgs(spec rootSpec, a Archive, excludes, debs, dir string) []string {
	args := []string{
		"--variant=essential", "--mode=root", "--format=directory", "--quiet",
		"--include=" + strings.Join(spec.include, ","),
		"--dpkgopt=" + excludes,
		"--skip=essential/unlink",
		// The sources carry signed-by: no need for gpg to work it out.
		"--skip=check/signed-by",
		`--setup-hook=mkdir -p "$1"/var/cache/apt/archives "$1"/etc/dpkg/dpkg.cfg.d`,
		`--setup-hook=echo force-unsafe-io > "$1"/etc/dpkg/dpkg.cfg.d/00varnishgw-build`,
		"--setup-hook=sync-in " + debs + " /var/cache/apt/archives/",
		"--customize-hook=sync-out /var/cache/apt/archives " + debs,
		`--customize-hook=rm -f "$1"/etc/resolv.conf "$1"/etc/hostname "$1"/etc/dpkg/dpkg.cfg.d/00varnishgw-build`,
	}
	for _, c := range spec.customize {
		args = append(args, "--customize-hook="+c)
	}
	args = append(args, a.Suite, dir)
	args = append(args, a.Sources()...)
	return args
}

// buildRoot runs mmdebstrap into dir (which must not exist). It runs in a
// private mount namespace (unshare --mount): the /proc, /sys and /dev
// mounts mmdebstrap makes in the root go away with it, even when it is
// killed.
func (b *builder) buildRoot(ctx context.Context, spec rootSpec, dir string) error {
	debs := filepath.Join(b.cacheDir, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return err
	}
	args := append([]string{"--mount", "--propagation", "private", "mmdebstrap"},
		mmdebstrapArgs(spec, b.archive, b.path(DpkgExcludesFile), debs, dir)...)
	cmd := exec.CommandContext(ctx, "unshare", args...)
	cmd.Env = b.env()
	// Interrupted, mmdebstrap and the apt and dpkg it runs stop together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	logPath := filepath.Join(b.work, "mmdebstrap-"+spec.name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	b.logf("building the Debian %s root %q with mmdebstrap (%d packages listed)", b.archive.Suite, spec.name, len(spec.include))
	if err := cmd.Run(); err != nil {
		data, _ := os.ReadFile(logPath)
		return fmt.Errorf("mmdebstrap %s root: %w; its output ends:\n%s", spec.name, err, lastLines(string(data), 25))
	}
	for _, pattern := range spec.remove {
		matches, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return fmt.Errorf("root %s: remove %s: %w", spec.name, pattern, err)
		}
		for _, m := range matches {
			if err := removeTree(m); err != nil {
				return err
			}
		}
	}
	b.logf("root %q built in %s", spec.name, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// root returns the directory of the root spec describes: from the cache
// when a root of the same key is there, else built (and cached). Without
// a cache (Check) it is built in the work directory.
func (b *builder) root(ctx context.Context, spec rootSpec) (string, error) {
	if b.opts.NoCache {
		dir := filepath.Join(b.work, "root-"+spec.name)
		return dir, b.buildRoot(ctx, spec, dir)
	}
	key, err := b.rootKey(ctx, spec)
	if err != nil {
		return "", err
	}
	roots := filepath.Join(b.cacheDir, "roots")
	dir := filepath.Join(roots, spec.name+"-"+key)
	if _, err := os.Stat(dir + ".ok"); err == nil {
		b.logf("root %q from the cache (%s)", spec.name, dir)
		return dir, nil
	}
	if err := os.MkdirAll(roots, 0o755); err != nil {
		return "", err
	}
	// Older roots of this name (and a build killed half way) go.
	old, _ := filepath.Glob(filepath.Join(roots, spec.name+"-*"))
	for _, o := range old {
		if err := removeTree(o); err != nil {
			return "", err
		}
	}
	tmp := dir + ".tmp"
	if err := b.buildRoot(ctx, spec, tmp); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, os.WriteFile(dir+".ok", nil, 0o644)
}

// rootKey is the cache key of a root: the package versions the archive
// resolves its includes to today (so a security update makes a new root),
// the mmdebstrap options, the files its hooks read, and the mmdebstrap
// version.
func (b *builder) rootKey(ctx context.Context, spec rootSpec) (string, error) {
	if b.apt == nil {
		p, err := newPrivateApt(filepath.Join(b.cacheDir, "apt"), b.archive)
		if err != nil {
			return "", err
		}
		start := time.Now()
		if err := p.update(ctx); err != nil {
			return "", err
		}
		b.apt = p
		b.logf("Debian %s package lists updated in %s (private apt in %s)", b.archive.Suite, time.Since(start).Round(100*time.Millisecond), p.dir)
	}
	set, err := b.apt.resolve(ctx, spec.include)
	if err != nil {
		return "", fmt.Errorf("resolve the packages of the %s root: %w", spec.name, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "root %s\n", spec.name)
	for _, a := range mmdebstrapArgs(spec, b.archive, "EXCLUDES", "DEBS", "DIR") {
		// The repository's place on disk does not shape the root.
		fmt.Fprintf(h, "arg %s\n", strings.ReplaceAll(a, b.opts.Repo, "REPO"))
	}
	for _, p := range set {
		fmt.Fprintf(h, "package %s\n", p)
	}
	for _, r := range spec.remove {
		fmt.Fprintf(h, "remove %s\n", r)
	}
	for _, f := range append([]string{DpkgExcludesFile}, spec.files...) {
		data, err := os.ReadFile(b.path(f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "file %s %x\n", f, sha256.Sum256(data))
	}
	v, err := exec.CommandContext(ctx, "mmdebstrap", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("mmdebstrap --version: %w; install mmdebstrap (make setup does)", err)
	}
	fmt.Fprintf(h, "mmdebstrap %s", v)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Package is one installed Debian package.
type Package struct {
	Name, Version, Architecture, Source, SourceVersion string
}

// installed lists the packages installed in root, sorted by name, with
// this machine's dpkg-query reading the root's dpkg database.
func installed(ctx context.Context, root string) ([]Package, error) {
	out, err := exec.CommandContext(ctx, "dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"), "-W",
		"-f=${db:Status-Abbrev}\t${Package}\t${Version}\t${Architecture}\t${source:Package}\t${source:Version}\n").Output()
	if err != nil {
		return nil, fmt.Errorf("list the packages of %s: %w", root, err)
	}
	var pkgs []Package
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 6 {
			return nil, fmt.Errorf("dpkg-query: unexpected line %q", sc.Text())
		}
		if strings.TrimSpace(f[0]) != "ii" {
			continue
		}
		pkgs = append(pkgs, Package{Name: f[1], Version: f[2], Architecture: f[3], Source: f[4], SourceVersion: f[5]})
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Name < pkgs[j].Name })
	return pkgs, nil
}

// dpkgList is `dpkg -l` of root, as a person reads it.
func dpkgList(ctx context.Context, root string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"), "-l")
	cmd.Env = append(os.Environ(), "COLUMNS=200", "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("dpkg -l of %s: %w", root, err)
	}
	return out, nil
}

// removeTree removes dir, never crossing into a file system mounted below
// it (a root whose build was killed may still hold mounts).
func removeTree(dir string) error {
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return nil
	}
	if out, err := exec.Command("rm", "-rf", "--one-file-system", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("remove %s: %w: %s", dir, err, out)
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func copyFile(dst, src string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
