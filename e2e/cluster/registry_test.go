package cluster

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/registrytest"
)

// TestImageFromRegistry follows the README's "In a cluster": the image make
// image built is pushed to a registry with skopeo, and the README's
// configuration, given that image, serves through pods whose image the node
// pulled from the registry. Before that, a class image the registry does
// not have fails the apply within a minute, naming the container, the
// image and the reason, instead of waiting for rollout_timeout.
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

	tf.mustRun("destroy")

	// The README's "In a cluster" configuration, with the image just pushed
	// and this cluster's kubeconfig.
	readmeHCL := readmeTerraform(t)
	for old, repl := range map[string]string{
		`"registry.example.com/varnishgw/gateway:dev"`: strconv.Quote(pushed),
		`"~/.kube/config"`: strconv.Quote(c.cp.Kubeconfig),
	} {
		if !strings.Contains(readmeHCL, old) {
			t.Fatalf("the README's configuration no longer has %s; update this test:\n%s", old, readmeHCL)
		}
		readmeHCL = strings.ReplaceAll(readmeHCL, old, repl)
	}
	for _, ns := range []string{"gateways", "shop"} {
		if err := demo.EnsureNamespace(c.ctx, c.cp.Client, ns); err != nil {
			t.Fatal(err)
		}
	}
	shop := *c
	shop.ns = "shop"
	shop.echo("web", 1)
	readme := c.terraform()
	readme.noKubeconfigVar = true
	readme.write(readmeHCL)
	readme.mustRun("apply")
	images, err := c.node.Images(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(images, pushed) {
		t.Errorf("the node's images %v do not include %s, pulled from the registry", images, pushed)
	}
	gw := object.Ref{Namespace: "gateways", Name: "public"}
	gwc := *c
	gwc.ns = gw.Namespace
	pods := gwc.gatewayPods(gw)
	if len(pods) != 1 || pods[0].Spec.Containers[0].Image != pushed {
		t.Fatalf("gateway pods %v, want one of image %s", podNames(pods), pushed)
	}
	shopReq := demo.Request{Host: "shop.example.com", Path: "/"}
	eventually(t, 10*time.Second, net.JoinHostPort(pods[0].Status.PodIP, "80"), shopReq, 200, "web-")
	eventually(t, 10*time.Second, gwc.serviceAddr(gwruntime.Name(gw), 80), shopReq, 200, "web-")
	readme.mustRun("destroy")
	for _, ns := range []string{"gateways", "shop"} {
		if err := c.cp.Client.CoreV1().Namespaces().Delete(c.ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}
}

// readmeTerraform is the Terraform configuration in the README's "In a
// cluster" section.
func readmeTerraform(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## In a cluster\n")
	if i < 0 {
		t.Fatal(`README.md has no section "## In a cluster"`)
	}
	s = s[i:]
	j := strings.Index(s, "```terraform\n")
	if j < 0 {
		t.Fatal(`README.md's "In a cluster" has no terraform block`)
	}
	s = s[j+len("```terraform\n"):]
	k := strings.Index(s, "```")
	if k < 0 {
		t.Fatal("README.md: the terraform block does not end")
	}
	return s[:k]
}
