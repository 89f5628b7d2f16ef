// Command image is `make image` and `make image-check`: it builds the
// gateway and echo images into bin/images without a container engine
// (package imagebuild), or, with -check, builds them again from scratch
// and proves the two builds agree, the gateway image is within its size
// limit and its varnishd, ghost and chaperone run.
//
//	go run ./internal/build/imagebuild/cmd/image [-out bin/images] [-cache DIR]
//	go run ./internal/build/imagebuild/cmd/image -check
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/build/imagebuild"
)

func main() {
	out := flag.String("out", "bin/images", "directory of the image archives and their descriptions")
	cache := flag.String("cache", imagebuild.DefaultCache(), "cache of Debian roots, package lists and downloads")
	check := flag.Bool("check", false, "build again without the cached roots, compare digests with -out's, check the size and smoke-test the images")
	maxSize := flag.Int64("max-size", imagebuild.MaxGatewaySize, "size limit of the gateway image, uncompressed, in bytes")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	repo, err := os.Getwd()
	if err != nil {
		fail(err)
	}
	opts := imagebuild.Options{Repo: repo, Out: *out, Cache: *cache, Archive: imagebuild.DefaultArchive(), Log: os.Stderr}
	start := time.Now()
	if *check {
		if err := imagebuild.Check(ctx, opts, *maxSize); err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "image-check: passed in %s\n", time.Since(start).Round(time.Second))
		return
	}
	infos, err := imagebuild.Build(ctx, opts)
	if err != nil {
		fail(err)
	}
	for _, i := range infos {
		fmt.Printf("%s\t%s\t%s\t%.1f MB\n", filepath.Join(*out, i.Archive), i.Name, i.Digest, float64(i.Size)/1e6)
	}
	fmt.Fprintf(os.Stderr, "image: done in %s\n", time.Since(start).Round(time.Second))
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "image: error: %v\n", err)
	os.Exit(1)
}
