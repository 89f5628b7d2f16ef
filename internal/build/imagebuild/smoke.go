package imagebuild

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/build/ociimage"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/echo"
)

// DiffArchives says how the images of two OCI archives differ.
func DiffArchives(a, b string) (string, error) {
	tmp, err := os.MkdirTemp("", "varnishgw-image-diff-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	ia, err := ociimage.ReadArchive(a, filepath.Join(tmp, "a"))
	if err != nil {
		return "", err
	}
	ib, err := ociimage.ReadArchive(b, filepath.Join(tmp, "b"))
	if err != nil {
		return "", err
	}
	return ociimage.Diff(ia, ib, 60)
}

// Extract unpacks the file system of the image in an OCI archive into dir,
// as a container runtime would (owners, modes, links, file capabilities),
// with GNU tar reading go-containerregistry's flattened layers.
func Extract(ctx context.Context, archive, dir string) error {
	tmp, err := os.MkdirTemp("", "varnishgw-image-extract-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	img, err := ociimage.ReadArchive(archive, tmp)
	if err != nil {
		return err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "tar", "-x", "-C", dir, "--numeric-owner", "--same-permissions", "--same-owner",
		"--xattrs", "--xattrs-include=security.capability")
	cmd.Stdin = rc
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("extract the file system of %s: %w: %s", archive, err, out)
	}
	return nil
}

// Smoke runs the images of dir without a container engine: each image's
// file system is extracted and its programs run in a chroot as uid 65532,
// in a private mount namespace with /dev and /proc, as in a pod:
//   - gateway: the user, home and paths; varnishd -V is the pinned Varnish,
//     and so are varnishstat and varnishncsa, which the chaperone runs;
//     hitch --version runs (the chaperone's default --hitch path);
//     varnishd -C compiles a VCL that imports ghost (ghost's $ABI strict
//     check against this varnishd); varnishd starts with that VCL (the
//     image's C compiler builds it), ghost routes a request to a backend on
//     this machine; hitch, configured as the chaperone configures it for
//     an HTTPS listener, terminates TLS for that varnishd and hands it an
//     HTTP/2 request over its PROXY Unix socket; chaperone -h runs.
//   - echo: echo-backend answers with its name.
func Smoke(ctx context.Context, dir string, logw io.Writer) error {
	logf := func(format string, args ...any) {
		if logw != nil {
			fmt.Fprintf(logw, "image-check: smoke: "+format+"\n", args...)
		}
	}
	gw, err := ReadInfo(dir, "gateway")
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "varnishgw-image-smoke-")
	if err != nil {
		return err
	}
	defer func() { _ = removeTree(tmp) }() // a temporary directory: best effort
	root := filepath.Join(tmp, "gateway")
	if err := Extract(ctx, gw.ArchivePath(), root); err != nil {
		return err
	}
	if err := checkTree(root); err != nil {
		return fmt.Errorf("gateway image %s: %w", gw.Name, err)
	}
	if err := prepare(root); err != nil {
		return err
	}
	out, err := inImage(ctx, root, nil, "id")
	if err != nil {
		return err
	}
	if want := fmt.Sprintf("uid=%d(varnishgw) gid=%d(varnishgw) groups=%d(varnishgw)", UID, GID, GID); strings.TrimSpace(out) != want {
		return fmt.Errorf("gateway image: id says %q, want %q", strings.TrimSpace(out), want)
	}
	out, err = inImage(ctx, root, nil, "varnishd", "-V")
	if err != nil {
		return err
	}
	upstream, _, _ := strings.Cut(gw.Varnish, "-")
	if !strings.Contains(out, "varnish-"+upstream+" ") {
		return fmt.Errorf("gateway image: varnishd -V says %q, want varnish-%s (package %s)", firstLine(out), upstream, gw.Varnish)
	}
	logf("varnishd -V as uid %d: %s", UID, firstLine(out))
	// The chaperone runs varnishstat (metrics) and, with a class's
	// access_log, varnishncsa: both come with the varnish package.
	for _, tool := range []string{"varnishstat", "varnishncsa"} {
		out, err = inImage(ctx, root, nil, tool, "-V")
		if err != nil {
			return fmt.Errorf("gateway image: %s (the chaperone runs it): %w", tool, err)
		}
		if !strings.Contains(out, "varnish-"+upstream+" ") {
			return fmt.Errorf("gateway image: %s -V says %q, want varnish-%s", tool, firstLine(out), upstream)
		}
	}

	// The chaperone runs hitch on the HTTPS listeners (--hitch, by default
	// the Debian package's path).
	hitch := gwruntime.DefaultChaperoneFlags().HitchBin
	out, err = inImage(ctx, root, nil, hitch, "--version")
	if err != nil {
		return fmt.Errorf("gateway image: %s (the chaperone runs it for HTTPS listeners): %w", hitch, err)
	}
	if !strings.HasPrefix(out, "hitch 1.") {
		return fmt.Errorf("gateway image: %s --version says %q, want hitch 1.x", hitch, firstLine(out))
	}
	logf("%s --version as uid %d: %s", hitch, UID, firstLine(out))

	// A backend on this machine, and ghost's routing to it.
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	bsrv := &http.Server{Handler: echo.Handler("smoke-backend"), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = bsrv.Serve(backend) }() // a failure shows as the smoke requests' failure
	defer bsrv.Close()
	bport := backend.Addr().(*net.TCPAddr).Port
	work := filepath.Join(root, "tmp/smoke")
	files := map[string]string{
		"ghost.json": fmt.Sprintf(`{"version": 2, "backends": [{"name": "smoke", "endpoints": [{"address": "127.0.0.1", "port": %d}]}],
  "vhosts": [{"hostname": "*", "routes": [{"name": "smoke",
  "match": {"path": {"type": "PathPrefix", "value": "/"}},
  "backends": [{"backend": "smoke"}]}]}]}`, bport),
		"smoke.vcl": `vcl 4.1;
import ghost;
backend default none;
sub vcl_init { new router = ghost.router("/tmp/smoke/ghost.json"); }
sub vcl_recv { if (router.recv()) { return (pass); } return (synth(router.status())); }
sub vcl_synth { router.synth(); return (deliver); }
sub vcl_deliver { router.deliver(); set resp.http.X-Route = router.route(); }
`,
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	if err := os.Chown(work, UID, GID); err != nil {
		return err
	}
	out, err = inImage(ctx, root, nil, "varnishd", "-C", "-n", "/tmp/smoke/n", "-f", "/tmp/smoke/smoke.vcl")
	if err != nil {
		return fmt.Errorf("ghost and the image's varnishd do not fit: %w", err)
	}
	if !strings.Contains(out, "Vmod_ghost_Func") && !strings.Contains(out, "VGC_vmod_ghost") {
		return fmt.Errorf("varnishd -C of a VCL importing ghost printed no ghost code:\n%s", lastLines(out, 10))
	}
	logf("varnishd -C compiled a VCL that imports ghost (%d bytes of C)", len(out))

	if err := serveThroughGhost(ctx, root, logf); err != nil {
		return err
	}

	out, err = inImage(ctx, root, nil, ChaperonePath, "-h")
	if err != nil && !strings.Contains(out, "Usage") {
		return err
	}
	if !strings.Contains(out, "-routing") {
		return fmt.Errorf("chaperone -h printed no usage with -routing:\n%s", lastLines(out, 10))
	}
	logf("chaperone -h printed its usage")

	return smokeEcho(ctx, dir, tmp, logf)
}

// checkTree checks the user, the directories and the files the pod relies on.
func checkTree(root string) error {
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		return err
	}
	want := fmt.Sprintf("varnishgw:x:%d:%d:", UID, GID)
	if !bytes.Contains(passwd, []byte("\n"+want)) {
		return fmt.Errorf("/etc/passwd has no %q line", want)
	}
	for _, c := range []struct {
		path     string
		mode     os.FileMode
		uid, gid int
	}{
		{HomeDir, os.ModeDir | 0o755, UID, GID},
		{"/tmp", os.ModeDir | os.ModeSticky | 0o777, 0, 0},
		{GhostPath, 0o644, 0, 0},
		{ChaperonePath, 0o755, 0, 0},
		{PackagesPath, 0o644, 0, 0},
		{SBOMPath, 0o644, 0, 0},
	} {
		fi, err := os.Lstat(filepath.Join(root, c.path))
		if err != nil {
			return fmt.Errorf("missing %s: %w", c.path, err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != c.mode || int(st.Uid) != c.uid || int(st.Gid) != c.gid {
			return fmt.Errorf("%s: mode %s owner %d:%d, want %s %d:%d", c.path, fi.Mode(), st.Uid, st.Gid, c.mode, c.uid, c.gid)
		}
	}
	// What the build machine or the build's time would put in: none of it.
	for _, gone := range []string{"etc/resolv.conf", "etc/hostname", "etc/apt", "var/lib/apt", "var/cache/apt",
		"var/log/dpkg.log", "var/log/apt", "var/log/alternatives.log", "var/cache/ldconfig/aux-cache", "var/lib/dpkg/status-old",
		"usr/share/man/man1", "usr/share/doc/varnish/changelog.Debian.gz", "usr/libexec/gcc/x86_64-linux-gnu/14/lto1"} {
		if _, err := os.Lstat(filepath.Join(root, gone)); err == nil {
			return fmt.Errorf("/%s is in the image: it must not be", gone)
		}
	}
	if id, err := os.ReadFile(filepath.Join(root, "etc/machine-id")); err == nil && len(id) > 0 {
		return fmt.Errorf("/etc/machine-id holds %q: it must be empty or absent", id)
	}
	return nil
}

// serveThroughGhost starts varnishd in the image with the smoke VCL, an
// HTTP socket and an HTTPS listener's PROXY socket, sends it a request that
// ghost routes to the backend, then the same request through hitch.
func serveThroughGhost(ctx context.Context, root string, logf func(string, ...any)) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	cert, err := prepareTLS(root)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	var log bytes.Buffer
	cmd := chrootCmd(ctx, root, nil, "varnishd", "-F", "-T", "none", "-n", "/tmp/smoke/n",
		"-a", fmt.Sprintf("http=127.0.0.1:%d", ports[0]), "-a", smokeTLSListener(),
		"-a", fmt.Sprintf("ghost-admin=127.0.0.1:%d", ports[1]),
		"-p", "feature=+http2", "-f", "/tmp/smoke/smoke.vcl")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }() // stopped: its exit status is not the result
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}()
	url := fmt.Sprintf("http://127.0.0.1:%d/smoke", ports[0])
	client := &http.Client{Timeout: 5 * time.Second}
	var last error
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("varnishd in the gateway image did not serve %s through ghost (%v); its output:\n%s", url, last, lastLines(log.String(), 30))
		case <-time.After(300 * time.Millisecond):
		}
		resp, err := client.Get(url)
		if err != nil {
			last = err
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && resp.Header.Get("X-Route") == "smoke" && strings.HasPrefix(string(body), "smoke-backend\n") {
			logf("varnishd served a request through ghost's route to a backend as uid %d (VCL compiled by the image's cc)", UID)
			return serveThroughHitch(ctx, root, cert, logf)
		}
		last = fmt.Errorf("%s, X-Route %q, body %q", resp.Status, resp.Header.Get("X-Route"), firstLine(string(body)))
	}
}

// smokeEcho runs the echo image's server and asks it its name.
func smokeEcho(ctx context.Context, dir, tmp string, logf func(string, ...any)) error {
	echo, err := ReadInfo(dir, "echo")
	if err != nil {
		return err
	}
	root := filepath.Join(tmp, "echo")
	if err := Extract(ctx, echo.ArchivePath(), root); err != nil {
		return err
	}
	if err := prepare(root); err != nil {
		return err
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var log bytes.Buffer
	cmd := chrootCmd(ctx, root, []string{"HOSTNAME=echo-smoke"}, EchoPath, "-listen", fmt.Sprintf("127.0.0.1:%d", ports[0]))
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }() // killed: its status is an error
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("the echo image's server did not answer: %s", log.String())
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", ports[0]))
		if err != nil {
			continue
		}
		first, _ := bufio.NewReader(resp.Body).ReadString('\n')
		resp.Body.Close()
		if first != "echo-smoke\n" {
			return fmt.Errorf("the echo image's server answered %q, want its name echo-smoke", first)
		}
		logf("echo-backend answered with its name as uid %d", UID)
		return nil
	}
}

// chrootCmd runs argv in root as uid:gid 65532 with /dev and /proc, in a
// private mount namespace (the mounts end with it) and its own process
// group. The environment is env plus PATH; the image needs no shell or env
// of its own.
func chrootCmd(ctx context.Context, root string, env []string, argv ...string) *exec.Cmd {
	script := `mount --rbind /dev "$1/dev" && mount -t proc proc "$1/proc" && shift && exec /usr/bin/env -i "$@"`
	args := []string{"--mount", "--propagation", "private", "--fork", "sh", "-c", script, "sh", root}
	args = append(args, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	args = append(args, env...)
	args = append(args, "/usr/sbin/chroot", fmt.Sprintf("--userspec=%d:%d", UID, GID), root)
	args = append(args, argv...)
	cmd := exec.CommandContext(ctx, "unshare", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// prepare makes the mount points chrootCmd needs in an extracted image.
func prepare(root string) error {
	for _, d := range []string{"dev", "proc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// inImage runs argv in the image at root (chrootCmd) and returns its output.
func inImage(ctx context.Context, root string, env []string, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := chrootCmd(ctx, root, env, argv...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s in the image as uid %d: %w:\n%s", strings.Join(argv, " "), UID, err, lastLines(string(out), 20))
	}
	return string(out), nil
}

func freePorts(n int) ([]int, error) {
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
