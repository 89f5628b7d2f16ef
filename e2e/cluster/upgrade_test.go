package cluster

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/build/imagebuild"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/tfcli"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// previousRelease is the commit of the release before this one: routing
// fragments in ConfigMaps that its chaperone reads, the provider's schema
// version 0. The upgrade test builds its provider and gateway image.
const previousRelease = "d3efdeed0a9f054adaf877af315a7001e33a3efa"

// previousImageCmd is the image build command in previousRelease's tree
// (internal/build/imagebuild/cmd/image since the folders were regrouped).
const previousImageCmd = "./internal/imagebuild/cmd/image"

// previousGatewayHCL is gatewayHCL as the previous release's provider reads
// it (nested attributes, before the blocks of this release), with the same
// arguments.
const previousGatewayHCL = tfcli.KubeconfigProvider + `
resource "varnishgw_gateway_class" "node" {
  name                 = "node-%[1]s"
  parameters_namespace = %[1]q
  image                = %[2]q
  varnishd_params      = %[5]s
}

resource "varnishgw_gateway" "node" {
  namespace             = %[1]q
  name                  = "node"
  gateway_class_name    = varnishgw_gateway_class.node.name
  listeners             = [{ name = "http", port = 80, protocol = "HTTP" }]
  mode                  = %[3]q
  replicas              = %[4]d
  drain_timeout_seconds = 20
  rollout_timeout       = "4m"
}

resource "varnishgw_http_route" "www" {
  namespace   = %[1]q
  name        = "www"
  parent_refs = [{ name = varnishgw_gateway.node.name }]
  hostnames   = ["www.node.test"]
  rules = [
    {
      matches = [{ path = { type = "Exact", value = "/catalog" } }]
      filters = [{
        type             = "RequestRedirect"
        request_redirect = { path = { type = "ReplaceFullPath", replace_full_path = "/products" }, status_code = 301 }
      }]
    },
    { backend_refs = [{ name = "web", port = 80 }] },
  ]
}

resource "varnishgw_http_route" "api" {
  namespace   = %[1]q
  name        = "api"
  parent_refs = [{ name = varnishgw_gateway.node.name }]
  hostnames   = ["api.node.test"]
  rules = [
    { backend_refs = [{ name = "api", port = 80, weight = 90 }, { name = "api-canary", port = 80, weight = 10 }] },
  ]
}
%[6]s
`

// buildPreviousRelease checks out previousRelease in a temporary git
// worktree and builds its provider and its gateway image there.
func buildPreviousRelease(t *testing.T) (providerDir string, gateway imagebuild.Info) {
	t.Helper()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	run := func(cwd string, name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = cwd
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly")
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		t.Logf("%s %s: %s", name, strings.Join(args, " "), time.Since(start).Round(time.Second))
	}
	if err := exec.Command("git", "-C", repo, "cat-file", "-e", previousRelease+"^{commit}").Run(); err != nil {
		t.Fatalf("the previous release %s is not in this clone's history (a shallow clone?): %v; clone the repository with its history", previousRelease, err)
	}
	run(repo, "git", "worktree", "add", "--detach", src, previousRelease)
	t.Cleanup(func() { _ = exec.Command("git", "-C", repo, "worktree", "remove", "--force", src).Run() })
	providerDir = filepath.Join(dir, "bin")
	run(src, "go", "build", "-o", providerDir+string(filepath.Separator), ".")
	images := filepath.Join(dir, "images")
	run(src, "go", "run", previousImageCmd, "-out", images)
	gateway, err = imagebuild.ReadInfo(images, "gateway")
	if err != nil {
		t.Fatal(err)
	}
	return providerDir, gateway
}

// TestUpgradeFromPreviousRelease: a gateway made by the previous release's
// provider, running its image, with 4 keep-alive clients sending through
// the gateway's Service all along:
//   - this release's provider with the previous image (the edge of the
//     supported skew): the apply fails, saying that the pods run an older
//     chaperone, and no request fails;
//   - this release's provider and image in one apply (the class's image
//     changes with the provider): no request fails, the state upgrades
//     itself, the routes' fragment ConfigMaps are replaced by
//     RoutingFragments that every new pod reports serving, and the next
//     plan is empty.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	c := newCluster(t)
	prevProvider, prevImage := buildPreviousRelease(t)
	if _, err := c.node.ImportImage(c.ctx, prevImage.ArchivePath()); err != nil {
		t.Fatal(err)
	}
	c.echo("web", 2)
	c.echo("api", 1)
	c.echo("api-canary", 1)

	dir := t.TempDir()
	ws, err := tfcli.New(c.ctx, tfcli.Options{Dir: dir, ProviderDir: prevProvider})
	if err != nil {
		t.Fatal(err)
	}
	tf := &terraform{c: c, ws: ws}
	tf.write(fmt.Sprintf(previousGatewayHCL, c.ns, prevImage.Name, "supervise", 2, "{}", ""))
	tf.mustRun("apply")
	gw := routing.ObjectRef{Namespace: c.ns, Name: "node"}
	legacy, err := c.cp.Client.CoreV1().ConfigMaps(c.ns).List(c.ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(gwruntime.GatewayLabels(gw)).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := countLegacyFragments(legacy.Items); n != 2 {
		t.Fatalf("the previous release wrote %d fragment ConfigMaps, want 2: this test upgrades nothing", n)
	}
	svc := c.serviceAddr(gwruntime.Name(gw), 80)
	www := demo.Request{Host: "www.node.test", Path: "/"}
	eventually(t, 30*time.Second, svc, www, 200, "web-")
	// The previous release's route apply returns before the pods serve
	// the routes (it has no wait_for_served): wait until each pod serves
	// both, so that the load below measures the next apply only.
	for _, p := range c.gatewayPods(gw) {
		addr := net.JoinHostPort(p.Status.PodIP, "80")
		eventually(t, 30*time.Second, addr, www, 200, "web-")
		eventually(t, 30*time.Second, addr, demo.Request{Host: "api.node.test", Path: "/"}, 200, "api")
	}

	// The edge of the supported skew: this release's provider with the
	// previous release's image. The pods roll (the template changed) but
	// still run the earlier chaperone: the apply fails saying so, and the
	// routes keep their fragment ConfigMaps, from which those pods serve.
	l := startLoad(4, svc, www)
	time.Sleep(time.Second)
	if tf.ws, err = tfcli.New(c.ctx, tfcli.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	tf.write(c.gatewayHCL(prevImage.Name, "supervise", 2, "", ""))
	out, err := tf.run("apply")
	if err == nil || !strings.Contains(strings.Join(strings.Fields(out+" "+err.Error()), " "), "run a chaperone older than this provider") {
		t.Errorf("apply of this release's provider with the previous image: %v, want a failure saying the pods run an older chaperone:\n%s", err, out)
	}
	time.Sleep(time.Second)
	l.end(t, "this release's provider with the previous image")
	legacy, err = c.cp.Client.CoreV1().ConfigMaps(c.ns).List(c.ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(gwruntime.GatewayLabels(gw)).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := countLegacyFragments(legacy.Items); n != 2 {
		t.Errorf("%d fragment ConfigMaps while pods of the previous release run, want the 2 they serve from", n)
	}

	// The upgrade, under load: this release's provider and image.
	l = startLoad(4, svc, www)
	time.Sleep(time.Second)
	tf.write(c.gatewayHCL(c.images.Gateway.Name, "supervise", 2, "", ""))
	tf.mustRun("apply")
	time.Sleep(time.Second)
	l.end(t, "the upgrade to this release")

	// Every route now comes from RoutingFragments, which each new pod
	// serves; no fragment ConfigMap is left; the next plan is empty.
	pods := c.gatewayPods(gw)
	reports, err := vgwapi.ReadReports(c.ctx, dynamic.NewForConfigOrDie(c.cp.Config), gw)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.Containers[0].Image != c.images.Gateway.Name {
			t.Errorf("pod %s runs %s after the upgrade", p.Name, p.Spec.Containers[0].Image)
		}
		if r := reports[p.Name]; r == nil || r.Status.Routing == nil || r.Status.Routing.Fragments != 2 {
			t.Errorf("pod %s reports %+v, want 2 fragments served", p.Name, r)
		}
		expect(t, net.JoinHostPort(p.Status.PodIP, "80"), demo.Request{Host: "api.node.test", Path: "/"}, 200, "api")
	}
	legacy, err = c.cp.Client.CoreV1().ConfigMaps(c.ns).List(c.ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(gwruntime.GatewayLabels(gw)).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := countLegacyFragments(legacy.Items); n != 0 {
		t.Errorf("%d fragment ConfigMaps left after the upgrade", n)
	}
	tf.mustRun("plan", "-detailed-exitcode")
	tf.mustRun("destroy")
	c.expectNothingLeft(2*time.Minute, "app")
}

// countLegacyFragments counts the fragment ConfigMaps of the previous
// release among cms (the VCL ConfigMap carries the fragment label too).
func countLegacyFragments(cms []corev1.ConfigMap) int {
	n := 0
	for _, cm := range cms {
		if _, ok := cm.Data["fragment.json"]; ok {
			n++
		}
	}
	return n
}
