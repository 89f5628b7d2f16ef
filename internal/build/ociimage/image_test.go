package ociimage_test

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/build/ociimage"
)

var epoch = time.Unix(1700000000, 0).UTC()

// tree makes a small root file system whose files carry mtimes of the
// moment (different on every call) and a hard link.
func tree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"usr/bin/hello":     "#!/bin/sh\necho hello\n",
		"etc/passwd":        "root:x:0:0::/root:/bin/sh\n",
		"var/lib/x/.keep":   "",
		"usr/share/z/a.txt": strings.Repeat("z", 5000),
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "usr/bin/hello"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "usr/bin/hello"), filepath.Join(dir, "usr/bin/hello2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/bin", filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	// A different mtime from the other call.
	now := time.Now().Add(time.Duration(time.Now().UnixNano()%1000) * time.Second)
	if err := os.Chtimes(filepath.Join(dir, "etc/passwd"), now, now); err != nil {
		t.Fatal(err)
	}
	return dir
}

func image(dir string) ociimage.Image {
	return ociimage.Image{
		Name:    "localhost/varnishgw/test:1.2.3",
		Created: epoch,
		Layers: []ociimage.Layer{
			ociimage.DirLayer(dir, "root file system"),
			ociimage.FilesLayer("app", ociimage.File{Path: "/usr/local/bin/app", Data: []byte("app"), Mode: 0o755},
				ociimage.File{Path: "/var/lib/app", Mode: os.ModeDir | 0o750, UID: 65532, GID: 65532}),
		},
		Config:      v1.Config{User: "65532:65532", Entrypoint: []string{"/usr/local/bin/app"}},
		Annotations: map[string]string{ociimage.AnnotationRevision: "abc"},
	}
}

func TestReproducible(t *testing.T) {
	var a, b bytes.Buffer
	ra, err := ociimage.Write(&a, image(tree(t)))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	rb, err := ociimage.Write(&b, image(tree(t)))
	if err != nil {
		t.Fatal(err)
	}
	if ra.Digest != rb.Digest || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("two builds of the same tree differ: %s (%d bytes) and %s (%d bytes)", ra.Digest, a.Len(), rb.Digest, b.Len())
	}
	if ra.Size == 0 || ra.CompressedSize == 0 {
		t.Errorf("sizes not reported: %+v", ra)
	}
	img2 := image(tree(t))
	img2.Annotations[ociimage.AnnotationRevision] = "def"
	rc, err := ociimage.Write(io.Discard, img2)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Digest == ra.Digest {
		t.Errorf("a changed annotation kept the digest %s", ra.Digest)
	}
}

// untar extracts an archive into a new directory.
func untar(t *testing.T, r io.Reader) string {
	t.Helper()
	dir := t.TempDir()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(epoch) {
			t.Errorf("archive entry %s has mtime %s, want %s", h.Name, h.ModTime, epoch)
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
		body, _ := io.ReadAll(tr)
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestArchiveIsAValidLayout(t *testing.T) {
	var buf bytes.Buffer
	res, err := ociimage.Write(&buf, image(tree(t)))
	if err != nil {
		t.Fatal(err)
	}
	lp, err := layout.FromPath(untar(t, &buf))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if desc.Digest.String() != res.Digest {
		t.Errorf("index names %s, Write returned %s", desc.Digest, res.Digest)
	}
	if got := desc.Annotations[ociimage.AnnotationRefName]; got != "1.2.3" {
		t.Errorf("ref name annotation %q, want the tag 1.2.3", got)
	}
	if got := desc.Annotations["io.containerd.image.name"]; got != "localhost/varnishgw/test:1.2.3" {
		t.Errorf("containerd name annotation %q", got)
	}
	img, err := lp.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Image(img); err != nil {
		t.Fatalf("the image does not validate: %v", err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Annotations[ociimage.AnnotationRevision] != "abc" || m.Annotations[ociimage.AnnotationCreated] != "2023-11-14T22:13:20Z" {
		t.Errorf("manifest annotations %v", m.Annotations)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || !cf.Created.Equal(epoch) || cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("config: user %q created %s os %s/%s", cf.Config.User, cf.Created, cf.OS, cf.Architecture)
	}

	// The first layer: sorted, the hard link kept as a link, numeric owners only.
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var names []string
	links := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(epoch) {
			t.Errorf("%s: uname %q gname %q mtime %s", h.Name, h.Uname, h.Gname, h.ModTime)
		}
		if h.Typeflag == tar.TypeLink || h.Typeflag == tar.TypeSymlink {
			links[h.Name] = h.Linkname
		}
	}
	want := []string{"bin", "etc/", "etc/passwd", "usr/", "usr/bin/", "usr/bin/hello", "usr/bin/hello2",
		"usr/share/", "usr/share/z/", "usr/share/z/a.txt", "var/", "var/lib/", "var/lib/x/", "var/lib/x/.keep"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("layer entries\n got %v\nwant %v", names, want)
	}
	if links["usr/bin/hello2"] != "usr/bin/hello" || links["bin"] != "usr/bin" {
		t.Errorf("links %v", links)
	}

	// The second layer: parents added, owners as given.
	rc2, err := layers[1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc2.Close()
	tr = tar.NewReader(rc2)
	var got []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, h.Name)
		if h.Name == "var/lib/app/" && (h.Uid != 65532 || h.Mode != 0o750) {
			t.Errorf("var/lib/app: uid %d mode %o", h.Uid, h.Mode)
		}
	}
	if strings.Join(got, " ") != "usr/ usr/local/ usr/local/bin/ usr/local/bin/app var/ var/lib/ var/lib/app/" {
		t.Errorf("files layer entries %v", got)
	}
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*ociimage.Image)
		want string
	}{
		{"no tag", func(i *ociimage.Image) { i.Name = "localhost/x" }, "with a tag"},
		{"no created", func(i *ociimage.Image) { i.Created = time.Time{} }, "SOURCE_DATE_EPOCH"},
		{"relative file", func(i *ociimage.Image) {
			i.Layers = []ociimage.Layer{ociimage.FilesLayer("x", ociimage.File{Path: "x", Data: []byte("x")})}
		}, "absolute"},
		{"missing dir", func(i *ociimage.Image) {
			i.Layers = []ociimage.Layer{ociimage.DirLayer("/nonexistent/dir", "x")}
		}, "/nonexistent/dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := image(t.TempDir())
			tc.edit(&img)
			_, err := ociimage.Write(io.Discard, img)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestReadArchiveAndDiff(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	tr := tree(t)
	if _, err := ociimage.WriteFile(a, image(tr)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tr, "etc/passwd"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ociimage.WriteFile(b, image(tr)); err != nil {
		t.Fatal(err)
	}
	ia, err := ociimage.ReadArchive(a, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ib, err := ociimage.ReadArchive(b, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if d, err := ociimage.Diff(ia, ia, 10); err != nil || d != "" {
		t.Errorf("an image differs from itself: %q, %v", d, err)
	}
	d, err := ociimage.Diff(ia, ib, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d, "layer 0 etc/passwd:") || strings.Contains(d, "usr/bin/hello") {
		t.Errorf("diff names more or less than etc/passwd:\n%s", d)
	}
}
