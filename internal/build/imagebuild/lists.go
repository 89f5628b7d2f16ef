package imagebuild

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Files of the image/ directory: the one source of truth for what the
// images hold, read by this package and by the Dockerfile.
const (
	GatewayPackagesFile    = "image/gateway-packages.txt"
	GhostBuildPackagesFile = "image/ghost-build-packages.txt"
	DpkgExcludesFile       = "image/dpkg-excludes.cfg"
	SysusersFile           = "image/varnishgw.sysusers.conf"
	// Varnish77PackagesFile pins the Varnish packages (the "exact" lines)
	// that ghost's tests run against: the image must carry the same.
	Varnish77PackagesFile = "scripts/varnish77-packages.txt"
)

// Paths and ids in the images.
const (
	GhostPath      = "/usr/lib/x86_64-linux-gnu/varnish/vmods/libvmod_ghost.so"
	ChaperonePath  = "/usr/local/bin/chaperone"
	EchoPath       = "/usr/local/bin/echo-backend"
	HomeDir        = "/var/lib/varnishgw"
	SysusersPath   = "/usr/lib/sysusers.d/varnishgw.conf"
	DpkgConfigPath = "/etc/dpkg/dpkg.cfg.d/varnishgw"
	PackagesPath   = "/usr/share/varnishgw/packages.txt"
	SBOMPath       = "/usr/share/varnishgw/sbom.cdx.json"
	UID, GID       = 65532, 65532
	User           = "65532:65532"
)

var packageName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)

// ReadPackages reads a package list: one Debian package name a line, "#"
// comments and blank lines ignored.
func ReadPackages(path string) ([]string, error) {
	var pkgs []string
	err := readLines(path, func(n int, fields []string) error {
		if len(fields) != 1 || !packageName.MatchString(fields[0]) {
			return fmt.Errorf("%s:%d: %q is not one Debian package name; write one name a line (comments after #)", path, n, strings.Join(fields, " "))
		}
		pkgs = append(pkgs, fields[0])
		return nil
	})
	if err == nil && len(pkgs) == 0 {
		err = fmt.Errorf("%s lists no package", path)
	}
	return pkgs, err
}

// ReadPins reads the "exact" lines of a "package version [exact]" list
// (scripts/varnish77-packages.txt): package name to version.
func ReadPins(path string) (map[string]string, error) {
	pins := map[string]string{}
	err := readLines(path, func(n int, fields []string) error {
		if len(fields) < 2 || len(fields) > 3 || !packageName.MatchString(fields[0]) {
			return fmt.Errorf("%s:%d: %q: want \"package version [exact]\"", path, n, strings.Join(fields, " "))
		}
		if len(fields) == 3 && fields[2] == "exact" {
			pins[fields[0]] = fields[1]
		}
		return nil
	})
	return pins, err
}

func readLines(path string, line func(n int, fields []string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read package list: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		if err := line(n, fields); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}
