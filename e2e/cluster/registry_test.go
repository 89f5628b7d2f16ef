package cluster

import (
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/registrytest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// TestImageFromRegistry follows the README: the image make image built is
// pushed to a registry with skopeo and the node pulls it from there. A
// class image the registry does not have fails the apply within a minute,
// naming the container, the image and the reason, instead of waiting for
// rollout_timeout; setting the pushed image then rolls the gateway out.
func TestImageFromRegistry(t *testing.T) {
	c := newCluster(t)
	c.echo("web", 1)
	c.echo("api", 1)
	c.echo("api-canary", 1)
	reg := registrytest.Start(t)
	repo := reg.Host + "/varnishgw/gateway"
	pushed := repo + ":" + c.images.Gateway.Tag
	registrytest.Skopeo(t, "copy", "--dest-tls-verify=false",
		"oci-archive:"+c.images.Gateway.ArchivePath(), "docker://"+pushed)

	missing := repo + ":not-pushed"
	tf := c.terraform()
	tf.write(c.gatewayHCL(missing, "supervise", 1, "", ""))
	start := time.Now()
	out, err := tf.run("apply")
	took := time.Since(start)
	if err == nil {
		t.Fatalf("apply with the image %s that the registry does not have succeeded:\n%s", missing, out)
	}
	flat := strings.Join(strings.Fields(out+" "+err.Error()), " ")
	if i := strings.Index(flat, "cannot roll out"); i >= 0 {
		t.Logf("apply with a missing image failed after %s: ...%s", took.Round(100*time.Millisecond), flat[i:min(len(flat), i+600)])
	}
	for _, want := range []string{"cannot roll out", "container chaperone", `image "` + missing + `"`} {
		if !strings.Contains(flat, want) {
			t.Errorf("the failed apply does not say %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`ErrImagePull|ImagePullBackOff`).MatchString(flat) {
		t.Errorf("the failed apply does not name the reason (ErrImagePull or ImagePullBackOff):\n%s", out)
	}
	if took > 90*time.Second {
		t.Errorf("the apply took %s to fail; a missing image must fail it within a minute of the pods' creation", took)
	}

	tf.write(c.gatewayHCL(pushed, "supervise", 1, "", ""))
	tf.mustRun("apply")
	images, err := c.node.Images(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(images, pushed) {
		t.Errorf("the node's images %v do not include %s, pulled from the registry", images, pushed)
	}
	gw := routing.ObjectRef{Namespace: c.ns, Name: "node"}
	pods := c.gatewayPods(gw)
	if len(pods) != 1 || pods[0].Spec.Containers[0].Image != pushed {
		t.Fatalf("gateway pods %v, want one of image %s", podNames(pods), pushed)
	}
	eventually(t, 10*time.Second, net.JoinHostPort(pods[0].Status.PodIP, "80"), demo.Request{Host: "www.node.test", Path: "/"}, 200, "web-")
	tf.mustRun("destroy")
}
