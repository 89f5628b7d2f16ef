package ociimage

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// ReadArchive unpacks the OCI archive at path into dir (an empty
// directory that must outlive the image) and returns the image in it: the
// archive's only image.
func ReadArchive(path, dir string) (v1.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open image archive: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read image archive %s: %w", path, err)
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || strings.HasPrefix(name, "..") {
			return nil, fmt.Errorf("image archive %s: entry %q leaves the archive", path, h.Name)
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return nil, err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
			out, err := os.Create(p)
			if err != nil {
				return nil, err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, fmt.Errorf("unpack %s from %s: %w", h.Name, path, err)
			}
		default:
			return nil, fmt.Errorf("image archive %s: entry %q is neither a file nor a directory", path, h.Name)
		}
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("image archive %s is no OCI layout: %w", path, err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(im.Manifests) != 1 {
		return nil, fmt.Errorf("image archive %s holds %d manifests, want 1", path, len(im.Manifests))
	}
	return lp.Image(im.Manifests[0].Digest)
}

// Diff lists how two images differ: their configs, and per layer the
// entries that are in one only or whose header or content differ. It says
// at most max lines; "" means no difference was found.
func Diff(a, b v1.Image, max int) (string, error) {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	// The configs, but for the layer digests (compared below).
	ca, err := configSansLayers(a)
	if err != nil {
		return "", err
	}
	cb, err := configSansLayers(b)
	if err != nil {
		return "", err
	}
	if ca != cb {
		add("config:\n  %s\n  %s", ca, cb)
	}
	la, err := a.Layers()
	if err != nil {
		return "", err
	}
	lb, err := b.Layers()
	if err != nil {
		return "", err
	}
	if len(la) != len(lb) {
		add("%d layers and %d layers", len(la), len(lb))
	}
	for i := 0; i < len(la) && i < len(lb); i++ {
		da, _ := la[i].Digest()
		db, _ := lb[i].Digest()
		if da == db {
			continue
		}
		ea, err := entries(la[i])
		if err != nil {
			return "", err
		}
		eb, err := entries(lb[i])
		if err != nil {
			return "", err
		}
		names := map[string]bool{}
		for n := range ea {
			names[n] = true
		}
		for n := range eb {
			names[n] = true
		}
		sorted := make([]string, 0, len(names))
		for n := range names {
			sorted = append(sorted, n)
		}
		sort.Strings(sorted)
		found := false
		for _, n := range sorted {
			if ea[n] != eb[n] {
				found = true
				add("layer %d %s:\n  %s\n  %s", i, n, orNone(ea[n]), orNone(eb[n]))
			}
		}
		if !found {
			add("layer %d: same entries, different bytes (entry order or tar format)", i)
		}
	}
	if len(out) > max {
		out = append(out[:max], fmt.Sprintf("... and %d more", len(out)-max))
	}
	return strings.Join(out, "\n"), nil
}

func configSansLayers(img v1.Image) (string, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.RootFS = v1.RootFS{}
	data, err := json.Marshal(cf)
	return string(data), err
}

func orNone(s string) string {
	if s == "" {
		return "(absent)"
	}
	return s
}

// entries summarises a layer's tar entries: header fields and a content hash.
func entries(l v1.Layer) (map[string]string, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	m := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return m, nil
		}
		if err != nil {
			return nil, err
		}
		sum := sha256.New()
		if _, err := io.Copy(sum, tr); err != nil {
			return nil, err
		}
		m[h.Name] = fmt.Sprintf("type %c mode %o uid %d gid %d size %d mtime %d link %q pax %v sha256 %x",
			h.Typeflag, h.Mode, h.Uid, h.Gid, h.Size, h.ModTime.Unix(), h.Linkname, h.PAXRecords, sum.Sum(nil)[:8])
	}
}
