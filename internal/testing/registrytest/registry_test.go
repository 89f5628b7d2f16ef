package registrytest_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/build/ociimage"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/registrytest"
)

// TestPushAndPull pushes an OCI archive with skopeo, as the README tells
// users to, and reads it back with skopeo and with go-containerregistry:
// all three agree on the digest ociimage computed.
func TestPushAndPull(t *testing.T) {
	reg := registrytest.Start(t)
	archive := filepath.Join(t.TempDir(), "small.tar")
	res, err := ociimage.WriteFile(archive, ociimage.Image{
		Name:    "localhost/varnishgw/small:1",
		Created: time.Unix(1700000000, 0),
		Layers: []ociimage.Layer{ociimage.FilesLayer("files",
			ociimage.File{Path: "/hello", Data: []byte("hello\n"), Mode: 0o644})},
		Config: v1.Config{Entrypoint: []string{"/hello"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Host + "/varnishgw/small:1"
	registrytest.Skopeo(t, "copy", "--dest-tls-verify=false", "oci-archive:"+archive, "docker://"+ref)
	if got := registrytest.Skopeo(t, "inspect", "--tls-verify=false", "--format", "{{.Digest}}", "docker://"+ref); got != res.Digest {
		t.Errorf("skopeo inspect: digest %s, pushed %s", got, res.Digest)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(r)
	if err != nil {
		t.Fatalf("pull %s: %v\nregistry log:\n%s", ref, err, reg.Log())
	}
	if desc.Digest.String() != res.Digest {
		t.Errorf("go-containerregistry: digest %s, pushed %s", desc.Digest, res.Digest)
	}
	if err := reg.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Get(r); err == nil {
		t.Error("the registry still answers after Stop")
	}
}
