// Command pauseimage builds the test node's pause image from the pause
// binary of the Kubernetes release (build/pause/linux/pause.c in the
// k8s.io/kubernetes module, compiled by scripts/setup.sh with gcc -Os
// -static) as an OCI archive, like the upstream image: /pause, run as
// 65535:65535.
//
//	pauseimage -binary pause -name localhost/varnishgw/pause:3.10.1 -created 2026-04-15T18:01:22Z -o pause.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/build/ociimage"
)

func main() {
	binary := flag.String("binary", "", "the static pause binary")
	name := flag.String("name", "", "the image's name, with a tag")
	created := flag.String("created", "", "the image's creation time, RFC 3339 (the Kubernetes release's time, for a reproducible image)")
	version := flag.String("version", "", "the Kubernetes release the pause source comes from, for the version annotation")
	out := flag.String("o", "", "the OCI archive to write")
	flag.Parse()
	if err := run(*binary, *name, *created, *version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "pauseimage:", err)
		os.Exit(1)
	}
}

func run(binary, name, created, version, out string) error {
	if binary == "" || name == "" || created == "" || out == "" {
		return fmt.Errorf("-binary, -name, -created and -o are required")
	}
	t, err := time.Parse(time.RFC3339, created)
	if err != nil {
		return fmt.Errorf("-created %q: %w", created, err)
	}
	res, err := ociimage.WriteFile(out, ociimage.Image{
		Name:    name,
		Created: t,
		Layers: []ociimage.Layer{ociimage.FilesLayer("pause from k8s.io/kubernetes "+version+" build/pause/linux/pause.c",
			ociimage.File{Path: "/pause", Source: binary, Mode: 0o755})},
		Config: v1.Config{User: "65535:65535", Entrypoint: []string{"/pause"}},
		Annotations: map[string]string{
			ociimage.AnnotationSource:  "https://github.com/kubernetes/kubernetes/tree/" + version + "/build/pause",
			ociimage.AnnotationVersion: version,
			ociimage.AnnotationTitle:   "pause",
		},
	})
	if err != nil {
		return err
	}
	fmt.Printf("%s %s (%d bytes)\n", out, res.Digest, res.Size)
	return nil
}
