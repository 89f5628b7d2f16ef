package imagebuild

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Source is the commit an image is built from.
type Source struct {
	// Revision is the full commit hash.
	Revision string
	// Time is the commit time: SOURCE_DATE_EPOCH, every timestamp in the image.
	Time time.Time
	// Dirty is true when the work tree has changes (tracked or untracked
	// files that git does not ignore): the image then holds them.
	Dirty bool
	// Version is the image tag: see version.
	Version string
}

// ReadSource reads the commit of the work tree at dir with git.
func ReadSource(ctx context.Context, dir string) (Source, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
			}
			return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	var s Source
	out, err := git("log", "-1", "--format=%H %ct")
	if err != nil {
		return s, fmt.Errorf("read the commit of %s (the image's version and time come from git): %w", dir, err)
	}
	rev, ct, _ := strings.Cut(out, " ")
	sec, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return s, fmt.Errorf("commit time %q: %w", ct, err)
	}
	s.Revision, s.Time = rev, time.Unix(sec, 0).UTC()
	status, err := git("status", "--porcelain")
	if err != nil {
		return s, err
	}
	s.Dirty = status != ""
	describe, _ := git("describe", "--tags", "--match", "v[0-9]*", "--abbrev=12")
	s.Version = version(describe, s.Time, s.Revision, s.Dirty)
	return s, nil
}

// version is the image tag of a commit:
//   - the output of `git describe --tags --match 'v[0-9]*' --abbrev=12` when
//     a release tag is reachable: "v0.3.0" on the tag, "v0.3.0-5-g0123456789ab"
//     five commits later;
//   - otherwise a Go-style pseudo-version: "v0.0.0-20261124111828-0123456789ab"
//     (commit time in UTC, then the first 12 digits of the hash);
//
// with "-dirty" appended when the work tree has changes. All are valid OCI
// tags, stable for a commit, and sort by time within a release.
func version(describe string, t time.Time, rev string, dirty bool) string {
	v := describe
	if v == "" {
		short := rev
		if len(short) > 12 {
			short = short[:12]
		}
		v = "v0.0.0-" + t.UTC().Format("20060102150405") + "-" + short
	}
	if dirty {
		v += "-dirty"
	}
	return v
}
