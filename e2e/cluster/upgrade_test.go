package cluster

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/build/imagebuild"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/tfcli"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// releasesFile lists the released versions, oldest first, one
// "<version> <commit>" per line ("#" starts a comment).
const releasesFile = "testdata/releases"

// release is a released version and the commit it was built from.
type release struct{ version, commit string }

// newestRelease reads the last release of releasesFile; ok is false when
// none is recorded yet.
func newestRelease(t *testing.T) (r release, ok bool) {
	t.Helper()
	b, err := os.ReadFile(releasesFile)
	if err != nil {
		t.Fatalf("read the recorded releases: %v", err)
	}
	for n, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		switch len(f) {
		case 0:
			continue
		case 2:
			r, ok = release{version: f[0], commit: f[1]}, true
		default:
			t.Fatalf("%s:%d: %q, want \"<version> <commit>\"", releasesFile, n+1, line)
		}
	}
	return r, ok
}

// buildRelease checks out r's commit in a temporary git worktree and
// builds its provider and its gateway image there.
func buildRelease(t *testing.T, r release) (providerDir string, gateway imagebuild.Info) {
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
	if err := exec.Command("git", "-C", repo, "cat-file", "-e", r.commit+"^{commit}").Run(); err != nil {
		t.Fatalf("release %s (%s) is not in this clone's history (a shallow clone?): %v; clone the repository with its history", r.version, r.commit, err)
	}
	run(repo, "git", "worktree", "add", "--detach", src, r.commit)
	t.Cleanup(func() { _ = exec.Command("git", "-C", repo, "worktree", "remove", "--force", src).Run() })
	providerDir = filepath.Join(dir, "bin")
	run(src, "go", "build", "-o", providerDir+string(filepath.Separator), ".")
	images := filepath.Join(dir, "images")
	run(src, "go", "run", "./internal/build/imagebuild/cmd/image", "-out", images)
	gateway, err = imagebuild.ReadInfo(images, "gateway")
	if err != nil {
		t.Fatal(err)
	}
	return providerDir, gateway
}

// TestUpgradeFromRelease: a gateway of two pods made by the newest
// release's provider, running its image, is upgraded to this work tree's
// provider and image in one apply (the class's image changes with the
// provider) while 4 keep-alive clients send through the gateway's Service:
// no request fails, every new pod reports serving both routes, and the
// next plan is empty.
func TestUpgradeFromRelease(t *testing.T) {
	rel, ok := newestRelease(t)
	if !ok {
		t.Skipf("no release recorded in %s yet: nothing to upgrade from", releasesFile)
	}
	c := newCluster(t)
	relProvider, relImage := buildRelease(t, rel)
	if _, err := c.node.ImportImage(c.ctx, relImage.ArchivePath()); err != nil {
		t.Fatal(err)
	}
	c.echo("web", 2)
	c.echo("api", 1)
	c.echo("api-canary", 1)

	dir := t.TempDir()
	ws, err := tfcli.New(c.ctx, tfcli.Options{Dir: dir, ProviderDir: relProvider})
	if err != nil {
		t.Fatal(err)
	}
	tf := &terraform{c: c, ws: ws}
	tf.write(c.gatewayHCL(relImage.Name, "supervise", 2, "", ""))
	tf.mustRun("apply")
	gw := object.Ref{Namespace: c.ns, Name: "node"}
	svc := c.serviceAddr(gwruntime.Name(gw), 80)
	www := demo.Request{Host: "www.node.test", Path: "/"}
	for _, p := range c.gatewayPods(gw) {
		addr := net.JoinHostPort(p.Status.PodIP, "80")
		eventually(t, 30*time.Second, addr, www, 200, "web-")
		eventually(t, 30*time.Second, addr, demo.Request{Host: "api.node.test", Path: "/"}, 200, "api")
	}

	l := startLoad(4, svc, www)
	time.Sleep(time.Second)
	if tf.ws, err = tfcli.New(c.ctx, tfcli.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	tf.write(c.gatewayHCL(c.images.Gateway.Name, "supervise", 2, "", ""))
	tf.mustRun("apply")
	time.Sleep(time.Second)
	l.end(t, "the upgrade from "+rel.version)

	reports, err := vgwapi.ReadReports(c.ctx, dynamic.NewForConfigOrDie(c.cp.Config), gw)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.gatewayPods(gw) {
		if p.Spec.Containers[0].Image != c.images.Gateway.Name {
			t.Errorf("pod %s runs %s after the upgrade", p.Name, p.Spec.Containers[0].Image)
		}
		if r := reports[p.Name]; r == nil || r.Status.Routing == nil || r.Status.Routing.Fragments != 2 {
			t.Errorf("pod %s reports %+v, want 2 fragments served", p.Name, r)
		}
		expect(t, net.JoinHostPort(p.Status.PodIP, "80"), demo.Request{Host: "api.node.test", Path: "/"}, 200, "api")
	}
	tf.mustRun("plan", "-detailed-exitcode")
	tf.mustRun("destroy")
	c.expectNothingLeft(2*time.Minute, "app")
}
