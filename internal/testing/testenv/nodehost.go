package testenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// What a node changes on the machine, and how it is undone.
//
// One node runs on a machine at a time: iptables chains, cgroups and sysctls
// are global. A node holds an exclusive flock on nodeLockPath while it runs
// and while its changes are undone. Before it changes anything it records in
// nodeStateFile what it will change (the sysctls' values, which shared
// directories existed and what they held). A janitor process (this binary
// again, see runJanitor) holds the lock too and waits for the node's owner to
// end: when the owner stops the node, exits, panics or is killed, the janitor
// undoes everything from the state file (teardown) and only then lets the
// lock go. When the janitor itself was killed, the next node start finds the
// state file and does the same (the sweep).
const (
	// nodeBase holds everything of the node that has its own place:
	// containerd's root and state, the kubelet's root, CNI configuration
	// and IPAM data, pod logs, configuration, certificates, logs and the
	// state file.
	nodeBase      = "/var/lib/varnishgw-testnode"
	nodeStateFile = nodeBase + "/state.json"
	janitorLog    = nodeBase + "/janitor.log"
	// nodeLockPath is the machine-wide node lock. The empty file stays, like
	// any lock file in /run/lock.
	nodeLockPath = "/run/lock/varnishgw-testnode.lock"
	// nodeCgroup is the kubelet's cgroup root, in every cgroup hierarchy.
	nodeCgroup = "varnishgw-testnode"
	// nodeBridge is the CNI bridge; it carries NodeIP.
	nodeBridge = "varnishgw0"

	// envMarker=nodeBase is in the environment of every node process
	// (and so of containerd's shims and runc), which is how teardown finds
	// them; pods' processes are found by their cgroup.
	envMarker = "VARNISHGW_TESTNODE"
	// envJanitor=1 makes this binary run as the janitor (see init).
	envJanitor = "VARNISHGW_TESTNODE_JANITOR"
)

// knownSysctls are the sysctls the node's components set: the kubelet's
// kernel tunables, IPv4 forwarding (the CNI bridge plugin), and kube-proxy's
// conntrack and localnet settings (configured to leave them, recorded in
// case). Their values are recorded before the node starts and restored after.
var knownSysctls = []string{
	"vm.overcommit_memory",
	"vm.panic_on_oom",
	"kernel.panic",
	"kernel.panic_on_oops",
	"kernel.keys.root_maxkeys",
	"kernel.keys.root_maxbytes",
	"net.ipv4.ip_forward", // first: writing it resets every interface's forwarding
	"net.ipv4.conf.all.forwarding",
	"net.ipv4.conf.default.forwarding",
	"net.ipv4.conf.all.accept_redirects", // writing ip_forward sets it too
	"net.ipv6.conf.all.forwarding",
	"net.ipv6.conf.default.forwarding",
	"net.ipv4.conf.all.route_localnet",
	"net.netfilter.nf_conntrack_max",
	"net.netfilter.nf_conntrack_tcp_timeout_established",
	"net.netfilter.nf_conntrack_tcp_timeout_close_wait",
	"net.netfilter.nf_conntrack_tcp_be_liberal",
	"net.bridge.bridge-nf-call-iptables",
	"net.bridge.bridge-nf-call-ip6tables",
}

// sharedDirs are places outside nodeBase that the node's components use
// whatever they are told: the kubelet's device plugin directory and
// container log links, containerd's network namespaces and shim sockets,
// the CNI result cache. A directory that did not exist before the node is
// removed after it; in one that did, the entries that were not there
// before are removed.
var sharedDirs = []string{
	"/var/lib/kubelet",
	"/var/log/containers",
	"/var/log/pods",
	"/run/netns",
	"/var/lib/cni",
	"/run/containerd",
	"/usr/libexec/kubernetes",
	"/etc/cni",
	"/opt/cni",
	"/opt/containerd",
	"/var/lib/containerd",
	"/etc/kubernetes",
	"/run/runc",
	"/var/run/kubernetes",
}

// hostState is what nodeStateFile records.
type hostState struct {
	// Owner is the process that started the node.
	Owner int `json:"owner"`
	// Started is when it did.
	Started time.Time `json:"started"`
	// Sysctls are the recorded sysctls and their values before the node,
	// in restore order.
	Sysctls []sysctlValue `json:"sysctls"`
	// Dirs are the shared directories as they were before the node.
	Dirs []dirRecord `json:"dirs"`
	// KubeProxy is the kube-proxy binary, for `kube-proxy --cleanup`.
	KubeProxy string `json:"kubeProxy"`
	// NftTables are the nf_tables tables before the node ("ip filter").
	NftTables []string `json:"nftTables"`
	// NftKnown says NftTables was recorded.
	NftKnown bool `json:"nftKnown"`
}

type sysctlValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type dirRecord struct {
	Path    string   `json:"path"`
	Existed bool     `json:"existed"`
	Entries []string `json:"entries,omitempty"`
}

// nodeHost is a node's hold on the machine: the lock and the janitor.
type nodeHost struct {
	lock        *os.File
	janitor     *exec.Cmd
	janitorIn   *os.File // closing it tells the janitor to undo the node's changes
	janitorDone chan struct{}
	janitorErr  error
}

// acquireNodeHost takes the machine's node lock (waiting for it up to
// opts.LockTimeout), sweeps what an earlier node left behind, records the
// machine's state, starts the janitor and prepares the bridge and the
// cgroups.
func acquireNodeHost(ctx context.Context, opts NodeOptions) (_ *nodeHost, err error) {
	if err := machineSupportsNode(); err != nil {
		return nil, fmt.Errorf("this machine cannot run a test node: %w", err)
	}
	lock, err := lockNode(ctx, opts.LockTimeout)
	if err != nil {
		return nil, err
	}
	h := &nodeHost{lock: lock}
	defer func() {
		if err != nil {
			err = errors.Join(err, h.release())
		}
	}()
	if err := sweepNode(); err != nil {
		return nil, err
	}
	if err := checkForeignKubernetes(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(nodeBase, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", nodeBase, err)
	}
	state := recordHostState(filepath.Join(opts.KubeBinDir, "kube-proxy"))
	if err := writeHostState(state); err != nil {
		return nil, err
	}
	if err := h.startJanitor(); err != nil {
		return nil, err
	}
	if err := setupCgroups(); err != nil {
		return nil, err
	}
	if err := setupBridge(); err != nil {
		return nil, err
	}
	return h, nil
}

// release undoes the node's changes to the machine (through the janitor)
// and lets the lock go. The node's processes should be stopped first; what
// still runs is killed.
func (h *nodeHost) release() error {
	if h == nil || h.lock == nil {
		return nil
	}
	var err error
	if h.janitor != nil {
		h.janitorIn.Close()
		select {
		case <-h.janitorDone:
			err = h.janitorErr
		case <-time.After(3 * time.Minute):
			err = errors.New("the janitor did not finish within 3 minutes")
		}
		if err != nil {
			log, _ := os.ReadFile(janitorLog)
			err = fmt.Errorf("undo the node's changes to this machine: %w; janitor log (%s):\n%s", err, janitorLog, log)
		}
	} else if _, statErr := os.Stat(nodeStateFile); statErr == nil {
		// The janitor never started: undo here.
		err = teardownNode()
	}
	h.lock.Close()
	h.lock = nil
	return err
}

// lockNode takes the node lock, waiting up to timeout while another node
// holds it and saying so every 30 seconds.
func lockNode(ctx context.Context, timeout time.Duration) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(nodeLockPath), 0o755); err != nil {
		return nil, fmt.Errorf("node lock: %w", err)
	}
	f, err := os.OpenFile(nodeLockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("node lock: %w", err)
	}
	start := time.Now()
	lastSaid := start
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("node lock %s: %w", nodeLockPath, err)
		}
		if time.Since(start) > timeout {
			f.Close()
			return nil, fmt.Errorf("another test node runs on this machine (%s) and did not end within %v; one node runs at a time (iptables chains, cgroups and sysctls are machine-wide): wait for it, or stop it", lockHolder(), timeout)
		}
		if time.Since(lastSaid) >= 30*time.Second {
			fmt.Fprintf(os.Stderr, "testenv: waiting %v so far for the node lock %s: %s\n", time.Since(start).Round(time.Second), nodeLockPath, lockHolder())
			lastSaid = time.Now()
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for the node lock (%s): %w", lockHolder(), ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	// Say who holds it, for those who wait.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(fmt.Sprintf("%d %s\n", os.Getpid(), strings.Join(os.Args, " "))), 0)
	}
	return f, nil
}

// lockHolder describes the process that took the node lock last.
func lockHolder() string {
	data, _ := os.ReadFile(nodeLockPath)
	line := strings.TrimSpace(string(data))
	if line == "" {
		return "holder unknown"
	}
	pid, rest, _ := strings.Cut(line, " ")
	if n, err := strconv.Atoi(pid); err == nil && syscall.Kill(n, 0) == syscall.ESRCH {
		return fmt.Sprintf("started by pid %s (%s), which has ended; its janitor is undoing the node's changes", pid, rest)
	}
	return fmt.Sprintf("held by pid %s: %s", pid, rest)
}

// sweepNode undoes what a node left behind when neither it nor its janitor
// could (both killed). The caller holds the lock.
func sweepNode() error {
	if _, err := os.Stat(nodeBase); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(filepath.Join("/sys/class/net", nodeBridge)); errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	owner := "unknown"
	if st, err := readHostState(); err == nil {
		owner = fmt.Sprintf("pid %d, started %s", st.Owner, st.Started.Format(time.RFC3339))
	}
	fmt.Fprintf(os.Stderr, "testenv: sweeping the leftovers of a test node that ended without cleaning up (%s)\n", owner)
	if err := teardownNode(); err != nil {
		return fmt.Errorf("sweep the leftovers of an earlier test node (%s): %w", owner, err)
	}
	return nil
}

// checkForeignKubernetes refuses to start a node on a machine where another
// Kubernetes node's iptables chains exist: teardown would remove them.
func checkForeignKubernetes() error {
	for _, ipt := range iptablesFlavors() {
		chains, err := ipt.ourChains()
		if err != nil {
			return err
		}
		if len(chains) > 0 {
			return fmt.Errorf("this machine has iptables chains of another Kubernetes node or CNI (%s: %s); the test node would remove them when it stops: run it on a machine without another Kubernetes", ipt.save, strings.Join(chains, ", "))
		}
	}
	return nil
}

func recordHostState(kubeProxy string) hostState {
	st := hostState{Owner: os.Getpid(), Started: time.Now().UTC(), KubeProxy: kubeProxy}
	if tables, err := nftTables(); err == nil {
		st.NftTables, st.NftKnown = tables, true
	}
	names := slices.Clone(knownSysctls)
	if ifaces, err := os.ReadDir("/proc/sys/net/ipv4/conf"); err == nil {
		for _, i := range ifaces {
			if n := i.Name(); n != "all" && n != "default" && !strings.Contains(n, ".") {
				names = append(names, "net.ipv4.conf."+n+".forwarding")
			}
		}
	}
	for _, name := range names {
		if v, err := readSysctl(name); err == nil {
			st.Sysctls = append(st.Sysctls, sysctlValue{Name: name, Value: v})
		}
	}
	for _, dir := range sharedDirs {
		rec := dirRecord{Path: dir}
		if entries, err := os.ReadDir(dir); err == nil {
			rec.Existed = true
			for _, e := range entries {
				rec.Entries = append(rec.Entries, e.Name())
			}
		}
		st.Dirs = append(st.Dirs, rec)
	}
	return st
}

func writeHostState(st hostState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := nodeStateFile + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write the node's state file: %w", err)
	}
	if err := os.Rename(tmp, nodeStateFile); err != nil {
		return fmt.Errorf("write the node's state file: %w", err)
	}
	return nil
}

func readHostState() (hostState, error) {
	var st hostState
	data, err := os.ReadFile(nodeStateFile)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("read %s: %w", nodeStateFile, err)
	}
	return st, nil
}

func sysctlPath(name string) string {
	return "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
}

func readSysctl(name string) (string, error) {
	data, err := os.ReadFile(sysctlPath(name))
	return strings.TrimSpace(string(data)), err
}

// startJanitor starts this binary again as the janitor. It gets the lock
// (so the lock is held until it has undone the node's changes) and a pipe
// whose end tells it that the node's owner stopped the node or ended.
func (h *nodeHost) startJanitor() error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start the node janitor: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		r.Close()
		w.Close()
		return err
	}
	logFile, err := os.Create(janitorLog)
	if err != nil {
		return fmt.Errorf("start the node janitor: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envJanitor+"=1")
	cmd.Stdin = r
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{h.lock, readyW} // fd 3, fd 4
	// Its own process group and session: a Ctrl-C or a kill of the test's
	// process group does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	r.Close()
	readyW.Close()
	logFile.Close()
	if err != nil {
		w.Close()
		readyR.Close()
		return fmt.Errorf("start the node janitor (%s): %w", self, err)
	}
	h.janitor, h.janitorIn, h.janitorDone = cmd, w, make(chan struct{})
	go func() {
		h.janitorErr = cmd.Wait()
		close(h.janitorDone)
	}()
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(readyR).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("unexpected %q", line)
		}
		ready <- err
	}()
	select {
	case err = <-ready:
	case <-time.After(30 * time.Second):
		err = errors.New("no word within 30 seconds")
	}
	readyR.Close()
	if err != nil {
		log, _ := os.ReadFile(janitorLog)
		return fmt.Errorf("start the node janitor (%s): %v; its log:\n%s", self, err, log)
	}
	return nil
}

func init() {
	if os.Getenv(envJanitor) == "1" {
		os.Exit(runJanitor())
	}
}

// runJanitor is the janitor: it waits for its stdin to end (the node's
// owner stopped the node or ended), undoes the node's changes and exits, 0
// when the machine is back as it was. SIGTERM makes it undo them at once;
// SIGINT and SIGHUP are ignored.
func runJanitor() int {
	unix.CloseOnExec(3) // the lock: not for the commands teardown runs
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	ready := os.NewFile(4, "ready")
	fmt.Fprintln(ready, "ready")
	ready.Close()

	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin) // its end, by EOF or error, is the signal
		close(eof)
	}()
	select {
	case <-eof:
		fmt.Println("janitor: the node's owner stopped the node or ended; undoing its changes")
	case sig := <-term:
		fmt.Printf("janitor: %v; undoing the node's changes\n", sig)
	}
	if err := teardownNode(); err != nil {
		fmt.Printf("janitor: %v\n", err)
		return 1
	}
	return 0
}

// teardownNode undoes everything a node changed on the machine, from the
// state file when there is one: it kills the node's processes and pods,
// unmounts, removes iptables chains, the bridge and the cgroups, restores
// the sysctls and shared directories, and removes nodeBase. It goes on
// after an error and returns them all.
func teardownNode() error {
	st, stErr := readHostState()
	if stErr != nil && !errors.Is(stErr, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "testenv: %v; undoing what can be undone without it\n", stErr)
	}
	var errs []error
	step := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	step("kill the node's processes", killNodeProcesses(30*time.Second))
	step("remove the pods' network namespaces", removePodNetns(st))
	step("unmount under "+nodeBase, unmountUnder(nodeBase))
	step("remove iptables chains", cleanupIptables(st.KubeProxy))
	if st.NftKnown {
		step("remove nf_tables tables", removeNewNftTables(st.NftTables))
	}
	step("remove the bridge", removeBridge())
	step("remove the cgroups", removeCgroups(30*time.Second))
	step("restore sysctls", restoreSysctls(st.Sysctls))
	for _, d := range st.Dirs {
		step("restore "+d.Path, restoreDir(d))
	}
	if len(errs) == 0 {
		step("remove "+nodeBase, os.RemoveAll(nodeBase))
	}
	return errors.Join(errs...)
}

// removePodNetns removes the network namespaces containerd made for pods
// in /run/netns: those the state file does not list, or without one, those
// named as containerd names them (cni-UUID).
func removePodNetns(st hostState) error {
	var before []string
	known := false
	for _, d := range st.Dirs {
		if d.Path == "/run/netns" {
			before, known = d.Entries, true
		}
	}
	entries, err := os.ReadDir("/run/netns")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if (known && !slices.Contains(before, e.Name())) || (!known && strings.HasPrefix(e.Name(), "cni-")) {
			errs = append(errs, removeAll(filepath.Join("/run/netns", e.Name())))
		}
	}
	return errors.Join(errs...)
}

// nodeProcesses returns the processes of the node: those with the marker
// in their environment or nodeBase on their command line (the components,
// containerd's shims, runc), and those in the node's cgroups (the pods).
func nodeProcesses() []int {
	marker := []byte(envMarker + "=" + nodeBase)
	self := os.Getpid()
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid == 1 {
			continue
		}
		dir := "/proc/" + e.Name()
		if env, err := os.ReadFile(dir + "/environ"); err == nil && slices.ContainsFunc(bytes.Split(env, []byte{0}), func(kv []byte) bool { return bytes.Equal(kv, marker) }) {
			pids = append(pids, pid)
			continue
		}
		if cmdline, err := os.ReadFile(dir + "/cmdline"); err == nil && bytes.Contains(cmdline, []byte(nodeBase)) {
			pids = append(pids, pid)
			continue
		}
		if cg, err := os.ReadFile(dir + "/cgroup"); err == nil && bytes.Contains(cg, []byte(":/"+nodeCgroup)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killNodeProcesses kills the node's processes and waits until they are
// gone (or zombies of a parent that is not the node's).
func killNodeProcesses(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var alive []int
		for _, pid := range nodeProcesses() {
			if isZombie(pid) {
				continue
			}
			syscall.Kill(pid, syscall.SIGKILL)
			alive = append(alive, pid)
		}
		if len(alive) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var desc []string
			for _, pid := range alive {
				desc = append(desc, fmt.Sprintf("%d (%s)", pid, cmdline(pid)))
			}
			return fmt.Errorf("still running after SIGKILL: %s", strings.Join(desc, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func isZombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X")
}

func cmdline(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(data), "\x00", " "))
}

// mountPoints returns the mount points at or under dir, deepest first
// (a mount point that is mounted more than once appears as often).
func mountPoints(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		p := unescapeMount(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.SliceStable(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	return points, nil
}

// unescapeMount decodes the octal escapes of /proc/self/mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder detaches every mount at or under dir.
func unmountUnder(dir string) error {
	for range 20 {
		points, err := mountPoints(dir)
		if err != nil {
			return err
		}
		if len(points) == 0 {
			return nil
		}
		for _, p := range points {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("unmount %s: %w", p, err)
			}
		}
	}
	points, _ := mountPoints(dir)
	return fmt.Errorf("still mounted: %s", strings.Join(points, ", "))
}

// removeAll unmounts what is mounted under path and removes it.
func removeAll(path string) error {
	if err := unmountUnder(path); err != nil {
		return err
	}
	return os.RemoveAll(path)
}

// restoreDir puts a shared directory back as the record says.
func restoreDir(d dirRecord) error {
	if !d.Existed {
		if _, err := os.Lstat(d.Path); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return removeAll(d.Path)
	}
	return removeNewEntries(d)
}

// removeNewEntries removes the entries of d.Path that the record does not
// list.
func removeNewEntries(d dirRecord) error {
	entries, err := os.ReadDir(d.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !slices.Contains(d.Entries, e.Name()) {
			errs = append(errs, removeAll(filepath.Join(d.Path, e.Name())))
		}
	}
	return errors.Join(errs...)
}

func restoreSysctls(values []sysctlValue) error {
	var errs []error
	for _, s := range values {
		cur, err := readSysctl(s.Name)
		if err != nil || cur == s.Value {
			continue // gone (an interface's) or unchanged
		}
		if err := os.WriteFile(sysctlPath(s.Name), []byte(s.Value), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("%s=%s: %w", s.Name, s.Value, err))
		}
	}
	return errors.Join(errs...)
}

// cgroupMounts returns the mount points of the cgroup hierarchies in use:
// every cgroup v1 hierarchy, or the cgroup v2 one when it is the only one
// (a v2 hierarchy beside v1 ones, "hybrid", is not the kubelet's).
func cgroupMounts() (v1 []string, v2 string, err error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		fields, fs := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(fs) < 1 {
			continue
		}
		switch fs[0] {
		case "cgroup":
			v1 = append(v1, unescapeMount(fields[4]))
		case "cgroup2":
			v2 = unescapeMount(fields[4])
		}
	}
	if len(v1) > 0 {
		v2 = ""
	}
	return v1, v2, nil
}

// setupCgroups creates the kubelet's cgroup root in every hierarchy.
func setupCgroups() error {
	v1, v2, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range v1 {
		dir := filepath.Join(m, nodeCgroup)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		// A new cpuset cgroup starts with no CPUs and no memory nodes.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if parent, err := os.ReadFile(filepath.Join(m, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
					return fmt.Errorf("set up cgroup %s: %w", dir, err)
				}
			}
		}
	}
	if v2 != "" {
		dir := filepath.Join(v2, nodeCgroup)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		controllers, err := os.ReadFile(filepath.Join(v2, "cgroup.subtree_control"))
		if err != nil {
			return err
		}
		var enable []string
		for _, c := range strings.Fields(string(controllers)) {
			enable = append(enable, "+"+c)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0o644); err != nil {
			return fmt.Errorf("enable controllers in %s: %w", dir, err)
		}
	}
	return nil
}

// removeCgroups removes the node's cgroup tree from every hierarchy,
// deepest first, retrying while the kernel finishes with killed processes.
func removeCgroups(timeout time.Duration) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var roots []string
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		fields, fs := strings.Fields(pre), strings.Fields(post)
		if ok && len(fields) >= 5 && len(fs) > 0 && (fs[0] == "cgroup" || fs[0] == "cgroup2") {
			roots = append(roots, filepath.Join(unescapeMount(fields[4]), nodeCgroup))
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		var left []string
		for _, root := range roots {
			var dirs []string
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error { // what cannot be walked is left and retried
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := unix.Rmdir(dirs[i]); err != nil && !errors.Is(err, unix.ENOENT) {
					left = append(left, fmt.Sprintf("%s (%v)", dirs[i], err))
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cannot remove %s", strings.Join(left, ", "))
		}
		_ = killNodeProcesses(5 * time.Second) // the removal is retried until the deadline
		time.Sleep(200 * time.Millisecond)
	}
}

// setupBridge creates the CNI bridge with NodeIP before the API server
// binds to it (the bridge plugin uses the existing bridge), and a route to
// the Service range through it, so that Service addresses are reachable
// from this machine whatever its default route.
func setupBridge() error {
	_, pods, err := net.ParseCIDR(PodCIDR)
	if err != nil {
		return err
	}
	ones, _ := pods.Mask.Size()
	for _, args := range [][]string{
		{"link", "add", nodeBridge, "type", "bridge"},
		{"addr", "add", NodeIP + "/" + strconv.Itoa(ones), "dev", nodeBridge},
		{"link", "set", nodeBridge, "up"},
		{"route", "add", ServiceCIDR, "dev", nodeBridge, "src", NodeIP},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

func removeBridge() error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", nodeBridge)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if out, err := exec.Command("ip", "link", "del", nodeBridge).CombinedOutput(); err != nil {
		return fmt.Errorf("ip link del %s: %v: %s", nodeBridge, err, out)
	}
	return nil
}

// SweepNode undoes what a test node left on this machine when neither it
// nor its janitor could (both killed, or the machine lost power): it waits
// up to timeout for the node lock, then kills the node's processes and
// restores the machine from the node's state file. A node start does the
// same; this is for tools and tests.
func SweepNode(ctx context.Context, timeout time.Duration) error {
	lock, err := lockNode(ctx, timeout)
	if err != nil {
		return err
	}
	defer lock.Close()
	return sweepNode()
}
