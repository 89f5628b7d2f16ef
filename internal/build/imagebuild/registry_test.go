package imagebuild

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/build/ociimage"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/registrytest"
)

// TestPushToRegistry does what the README tells users: push the archives
// make image wrote to a registry with skopeo, then inspect and pull them
// back. The registry keeps the digest make image computed, and the
// annotations.
func TestPushToRegistry(t *testing.T) {
	dir := os.Getenv("VARNISHGW_IMAGES")
	if dir == "" {
		dir = "../../../bin/images"
	}
	var infos []Info
	for _, name := range []string{"echo", "gateway"} {
		info, err := ReadInfo(dir, name)
		if err != nil {
			t.Skipf("no images to push (%v)", err)
		}
		infos = append(infos, info)
	}
	reg := registrytest.Start(t)
	for _, info := range infos {
		ref := reg.Host + "/varnishgw/" + filepath.Base(info.Repository) + ":" + info.Tag
		// The README's command, with the local registry's plain HTTP.
		registrytest.Skopeo(t, "copy", "--dest-tls-verify=false", "oci-archive:"+info.ArchivePath(), "docker://"+ref)
		if got := registrytest.Skopeo(t, "inspect", "--tls-verify=false", "--format", "{{.Digest}}", "docker://"+ref); got != info.Digest {
			t.Errorf("%s: the registry has digest %s, make image wrote %s", ref, got, info.Digest)
		}
		var manifest struct {
			Annotations map[string]string `json:"annotations"`
		}
		raw := registrytest.Skopeo(t, "inspect", "--tls-verify=false", "--raw", "docker://"+ref)
		if err := json.Unmarshal([]byte(raw), &manifest); err != nil {
			t.Fatalf("manifest of %s: %v", ref, err)
		}
		for k, want := range map[string]string{
			ociimage.AnnotationRevision: info.Revision,
			ociimage.AnnotationVersion:  info.Tag,
			ociimage.AnnotationSource:   SourceURL,
		} {
			if manifest.Annotations[k] != want {
				t.Errorf("%s: annotation %s = %q, want %q", ref, k, manifest.Annotations[k], want)
			}
		}
		back := filepath.Join(t.TempDir(), "back.tar")
		registrytest.Skopeo(t, "copy", "--src-tls-verify=false", "docker://"+ref, "oci-archive:"+back)
		img, err := ociimage.ReadArchive(back, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if d, err := img.Digest(); err != nil || d.String() != info.Digest {
			t.Errorf("%s pulled back: digest %v (%v), want %s", ref, d, err, info.Digest)
		}
	}
}
