// Package ociimage writes reproducible OCI image archives without a
// container engine: directory trees or a few files become layers with
// sorted entries and fixed timestamps, and the image goes into a tar of an
// OCI image layout (an "oci-archive"), which `ctr images import`,
// `skopeo copy oci-archive:...` and `crane push` read.
//
// The same inputs give the same bytes, so the same image digest: every
// timestamp is the image's Created time (SOURCE_DATE_EPOCH), entries are
// sorted, owners are numeric ids, and the archive itself is written in a
// fixed order.
package ociimage

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotation keys of the OCI image spec (annotations.md) that Build sets or
// that callers commonly pass in Image.Annotations.
const (
	AnnotationRefName  = "org.opencontainers.image.ref.name"
	AnnotationCreated  = "org.opencontainers.image.created"
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationVersion  = "org.opencontainers.image.version"
	AnnotationTitle    = "org.opencontainers.image.title"
	// annotationContainerdName names the image on `ctr images import`.
	annotationContainerdName = "io.containerd.image.name"
)

// Image describes an image to write.
type Image struct {
	// Name is the full reference the image is imported under, with a tag:
	// "localhost/varnishgw/gateway:0.1.0".
	Name string
	// Created is the time recorded everywhere in the image: the config's
	// created time, history and every file's modification time. Use
	// SOURCE_DATE_EPOCH for reproducible builds.
	Created time.Time
	// Layers, bottom first.
	Layers []Layer
	// Config is the run configuration (User, Env, Entrypoint, Cmd,
	// WorkingDir, ExposedPorts, Labels).
	Config v1.Config
	// Annotations go on the manifest; org.opencontainers.image.created is
	// set from Created.
	Annotations map[string]string
}

// Result is what Write produced.
type Result struct {
	// Digest is the manifest digest ("sha256:..."): the image's identity
	// in a registry and in containerd.
	Digest string
	// Size is the total size of the layers uncompressed, in bytes: the
	// image's size on a node's disk, near enough.
	Size int64
	// CompressedSize is the total size of the layers as stored and pulled.
	CompressedSize int64
}

// WriteFile writes the image as an OCI archive to path (through a
// temporary file, so path is complete or absent).
func WriteFile(path string, img Image) (*Result, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	res, err := Write(tmp, img)
	if err == nil {
		err = tmp.Close()
	} else {
		tmp.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("write image %s to %s: %w", img.Name, path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, fmt.Errorf("write image %s: %w", img.Name, err)
	}
	return res, nil
}

// Write writes the image as an OCI archive to w.
func Write(w io.Writer, img Image) (*Result, error) {
	ref, err := name.NewTag(img.Name, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("image name %q: %w; give a full reference with a tag, like localhost/varnishgw/gateway:0.1.0", img.Name, err)
	}
	if img.Created.IsZero() {
		return nil, fmt.Errorf("image %s: no Created time; set it (from SOURCE_DATE_EPOCH) so the image is reproducible", img.Name)
	}
	if len(img.Layers) == 0 {
		return nil, fmt.Errorf("image %s: no layers", img.Name)
	}
	created := img.Created.UTC().Truncate(time.Second)
	work, err := os.MkdirTemp("", "ociimage-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	res := &Result{}
	var adds []mutate.Addendum
	for i, l := range img.Layers {
		tarPath := filepath.Join(work, fmt.Sprintf("layer-%d.tar", i))
		f, err := os.Create(tarPath)
		if err != nil {
			return nil, err
		}
		err = l.writeTar(f, created)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("layer %d (%s): %w", i, l.Comment, err)
		}
		layer, err := tarball.LayerFromFile(tarPath, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
		if err != nil {
			return nil, fmt.Errorf("layer %d (%s): %w", i, l.Comment, err)
		}
		fi, err := os.Stat(tarPath)
		if err != nil {
			return nil, err
		}
		res.Size += fi.Size()
		csize, err := layer.Size()
		if err != nil {
			return nil, fmt.Errorf("compress layer %d (%s): %w", i, l.Comment, err)
		}
		res.CompressedSize += csize
		adds = append(adds, mutate.Addendum{
			Layer:     layer,
			MediaType: types.OCILayer,
			History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "varnishgw ociimage", Comment: l.Comment},
		})
	}

	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	image, err := mutate.Append(base, adds...)
	if err != nil {
		return nil, fmt.Errorf("assemble image %s: %w", img.Name, err)
	}
	cf, err := image.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: created}
	cf.Config = img.Config
	if image, err = mutate.ConfigFile(image, cf); err != nil {
		return nil, fmt.Errorf("set the config of image %s: %w", img.Name, err)
	}
	ann := map[string]string{AnnotationCreated: created.Format(time.RFC3339)}
	for k, v := range img.Annotations {
		ann[k] = v
	}
	image = mutate.Annotations(image, ann).(v1.Image)

	digest, err := image.Digest()
	if err != nil {
		return nil, fmt.Errorf("digest of image %s: %w", img.Name, err)
	}
	res.Digest = digest.String()

	dir := filepath.Join(work, "layout")
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("write OCI layout: %w", err)
	}
	if err := lp.AppendImage(image, layout.WithAnnotations(map[string]string{
		AnnotationRefName:        ref.TagStr(),
		annotationContainerdName: ref.Name(),
	})); err != nil {
		return nil, fmt.Errorf("write OCI layout of image %s: %w", img.Name, err)
	}
	if err := tarDir(w, dir, created); err != nil {
		return nil, fmt.Errorf("archive OCI layout of image %s: %w", img.Name, err)
	}
	return res, nil
}

// tarDir writes the OCI layout under dir as a tar: oci-layout first,
// index.json, then blobs, sorted, with fixed times and owners.
func tarDir(w io.Writer, dir string, mtime time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	rank := func(n string) int {
		switch n {
		case "oci-layout":
			return 0
		case "index.json":
			return 1
		}
		return 2
	}
	slices.SortFunc(names, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	tw := tar.NewWriter(w)
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: n, Mode: 0o644, Typeflag: tar.TypeReg, Size: fi.Size()}
		if fi.IsDir() {
			h = &tar.Header{Name: n + "/", Mode: 0o755, Typeflag: tar.TypeDir}
		}
		normalize(h, mtime)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if err := copyFile(tw, p, h.Size); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}
