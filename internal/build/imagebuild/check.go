package imagebuild

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// MaxGatewaySize is the gateway image's size limit, uncompressed: 300 MB.
const MaxGatewaySize = 300_000_000

// Check proves what make image promises, for the images in opts.Out:
//  1. reproducible: a second build, with fresh roots (not the cache's),
//     gives the same digests; when not, it names the entries that differ;
//  2. the gateway image is at most maxSize bytes uncompressed;
//  3. the images run: see smoke.
func Check(ctx context.Context, opts Options, maxSize int64) error {
	var first []Info
	for _, name := range []string{"gateway", "echo"} {
		i, err := ReadInfo(opts.Out, name)
		if err != nil {
			return err
		}
		first = append(first, i)
	}
	again := opts
	again.NoCache = true
	tmp, err := os.MkdirTemp("", "varnishgw-image-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	again.Out = filepath.Join(tmp, "images")
	second, err := Build(ctx, again)
	if err != nil {
		return fmt.Errorf("second build: %w", err)
	}
	for i, a := range first {
		b := second[i]
		if a.Name != b.Name {
			return fmt.Errorf("the images in %s are of another commit (%s) than the work tree (%s): run make image", opts.Out, a.Name, b.Name)
		}
		if a.Digest != b.Digest {
			diff, err := DiffArchives(a.ArchivePath(), filepath.Join(again.Out, b.Archive))
			if err != nil {
				diff = "(cannot compare them: " + err.Error() + ")"
			}
			return fmt.Errorf("not reproducible: %s built with the cached roots is %s, built from scratch %s; they differ in:\n%s", a.Name, a.Digest, b.Digest, diff)
		}
		log(opts, "%s: two builds give one digest, %s", a.Name, a.Digest)
	}
	gw := first[0]
	if gw.Size > maxSize {
		return fmt.Errorf("the gateway image is %.1f MB uncompressed, over its limit of %.1f MB: see %s for what it holds", float64(gw.Size)/1e6, float64(maxSize)/1e6, filepath.Join(opts.Out, gw.Packages))
	}
	log(opts, "%s: %.1f MB uncompressed, within %.0f MB", gw.Name, float64(gw.Size)/1e6, float64(maxSize)/1e6)
	return Smoke(ctx, opts.Out, opts.Log)
}

func log(opts Options, format string, args ...any) {
	if opts.Log != nil {
		fmt.Fprintf(opts.Log, "image-check: "+format+"\n", args...)
	}
}
