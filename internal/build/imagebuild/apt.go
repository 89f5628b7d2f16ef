package imagebuild

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Archive is where the Debian packages come from.
type Archive struct {
	// Suite is the Debian release: "trixie".
	Suite string
	// Mirror and SecurityMirror are the archive's addresses
	// ($VARNISHGW_DEBIAN_MIRROR and $VARNISHGW_DEBIAN_SECURITY_MIRROR, as
	// for scripts/varnish77.sh).
	Mirror, SecurityMirror string
	// Keyring verifies the archive's Release files; Debian 12's
	// debian-archive-keyring holds the trixie keys.
	Keyring string
}

// DefaultArchive is Debian 13 from deb.debian.org, or the mirrors the
// environment names.
func DefaultArchive() Archive {
	a := Archive{
		Suite:          "trixie",
		Mirror:         "http://deb.debian.org/debian",
		SecurityMirror: "http://deb.debian.org/debian-security",
		Keyring:        "/usr/share/keyrings/debian-archive-keyring.gpg",
	}
	if m := os.Getenv("VARNISHGW_DEBIAN_MIRROR"); m != "" {
		a.Mirror = m
	}
	if m := os.Getenv("VARNISHGW_DEBIAN_SECURITY_MIRROR"); m != "" {
		a.SecurityMirror = m
	}
	return a
}

// Sources are the sources.list lines: the release, its updates and its
// security updates.
func (a Archive) Sources() []string {
	return []string{
		fmt.Sprintf("deb [signed-by=%s] %s %s main", a.Keyring, a.Mirror, a.Suite),
		fmt.Sprintf("deb [signed-by=%s] %s %s-updates main", a.Keyring, a.Mirror, a.Suite),
		fmt.Sprintf("deb [signed-by=%s] %s %s-security main", a.Keyring, a.SecurityMirror, a.Suite),
	}
}

// privateApt is an apt configuration of its own under dir: sources, lists,
// cache and an empty dpkg status, and none of /etc/apt (APT_CONFIG with
// Dir::Etc::main and parts moved away). It only resolves package sets; it
// never installs.
type privateApt struct {
	dir    string
	config string
}

func newPrivateApt(dir string, a Archive) (*privateApt, error) {
	if _, err := os.Stat(a.Keyring); err != nil {
		return nil, fmt.Errorf("archive keyring: %w; install debian-archive-keyring (make setup does)", err)
	}
	for _, d := range []string{"conf.d", "sources.list.d", "preferences.d", "trusted.gpg.d", "state/lists/partial", "cache/archives/partial", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	files := map[string]string{
		"status":       "",
		"sources.list": strings.Join(a.Sources(), "\n") + "\n",
		"apt.conf": fmt.Sprintf(`Dir::Etc::main "/dev/null";
Dir::Etc::parts "%[1]s/conf.d";
Dir::Etc::sourcelist "%[1]s/sources.list";
Dir::Etc::sourceparts "%[1]s/sources.list.d";
Dir::Etc::preferences "%[1]s/preferences";
Dir::Etc::preferencesparts "%[1]s/preferences.d";
Dir::Etc::trusted "%[1]s/trusted.gpg";
Dir::Etc::trustedparts "%[1]s/trusted.gpg.d";
Dir::State "%[1]s/state";
Dir::State::lists "%[1]s/state/lists";
Dir::State::status "%[1]s/status";
Dir::Cache "%[1]s/cache";
Dir::Log "%[1]s/log";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
APT::Install-Recommends "false";
APT::Sandbox::User "root";
Acquire::Languages "none";
Acquire::AllowInsecureRepositories "false";
`, dir),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	return &privateApt{dir: dir, config: filepath.Join(dir, "apt.conf")}, nil
}

func (p *privateApt) run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "apt-get", args...)
	cmd.Env = append(os.Environ(), "APT_CONFIG="+p.config, "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("apt-get %s (private configuration %s): %w: %s", strings.Join(args, " "), p.config, err, strings.TrimSpace(stderr.String()))
	}
	if args[0] == "update" && bytes.Contains(append(out, stderr.Bytes()...), []byte("\nW: ")) {
		return nil, fmt.Errorf("apt-get update of the private Debian sources warned: refusing packages that may be unverified:\n%s%s", out, stderr.Bytes())
	}
	return out, nil
}

// update refreshes the package lists.
func (p *privateApt) update(ctx context.Context) error {
	_, err := p.run(ctx, "-q", "update")
	return err
}

// resolve returns the packages, "name=version" sorted, that installing
// pkgs (apt's "name" or "name=version") on top of every Essential package
// gives on an empty system: what mmdebstrap's essential variant with
// --include=pkgs installs.
func (p *privateApt) resolve(ctx context.Context, pkgs []string) ([]string, error) {
	out, err := p.run(ctx, append([]string{"-s", "-q", "install", "?essential"}, pkgs...)...)
	if err != nil {
		return nil, err
	}
	return parseSimulation(out)
}

// parseSimulation reads the "Inst name (version ...)" lines of
// apt-get -s install.
func parseSimulation(out []byte) ([]string, error) {
	var set []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || f[0] != "Inst" {
			continue
		}
		if !strings.HasPrefix(f[2], "(") {
			return nil, fmt.Errorf("apt-get -s: unexpected line %q (an upgrade on an empty system?)", sc.Text())
		}
		set = append(set, f[1]+"="+strings.TrimPrefix(f[2], "("))
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("apt-get -s install resolved no package:\n%s", out)
	}
	sort.Strings(set)
	return set, nil
}
