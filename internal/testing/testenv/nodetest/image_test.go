package nodetest

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/build/ociimage"
)

// httpdImage is the tests' HTTP server: Debian's static busybox running
// httpd on port 8080 as nobody, serving /www; /cgi-bin/hostname answers
// the pod's name, and every request is logged to stderr. /bin/incluster
// (testdata/incluster) asks the API server who the pod is.
const httpdImage = "localhost/varnishgw/nodetest-httpd:1"

// writeHTTPDImage writes the httpd image as an OCI archive to path; env
// adds to its environment (and so changes its config and digest).
func writeHTTPDImage(t *testing.T, path, name string, env ...string) {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"bin", "www/cgi-bin", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("the test image needs Debian's busybox-static (internal/testing/testenv/debian-packages.txt): %v", err)
	}
	files := map[string]string{
		"www/index.html":       "varnishgw nodetest\n",
		"www/cgi-bin/hostname": "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\nhostname\n",
	}
	for p, body := range files {
		if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "bin/busybox"), busybox, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(root, "bin/incluster"), "./testdata/incluster")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build testdata/incluster: %v\n%s", err, out)
	}
	for _, applet := range []string{"sh", "hostname", "cat", "wget", "ls"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", applet)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ociimage.WriteFile(path, ociimage.Image{
		Name:    name,
		Created: time.Unix(1700000000, 0),
		Layers:  []ociimage.Layer{ociimage.DirLayer(root, "busybox httpd")},
		Config: v1.Config{
			User:       "65534:65534",
			Env:        append([]string{"PATH=/bin"}, env...),
			Entrypoint: []string{"/bin/busybox", "httpd", "-f", "-vv", "-p", "8080", "-h", "/www"},
		},
	}); err != nil {
		t.Fatal(err)
	}
}

// imageFromArchive reads the image of an OCI archive.
func imageFromArchive(t *testing.T, archive string) v1.Image {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, tr); err != nil {
			t.Fatal(err)
		}
		out.Close()
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("index of %s: %v (%d manifests)", archive, err, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}
