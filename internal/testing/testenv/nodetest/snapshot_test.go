package nodetest

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// A snapshot is what a node may change on this machine, as sets of
// "kind: item" strings: sysctls with their values, iptables rules and
// chains (v4 and v6, nf_tables and legacy), the nf_tables ruleset, mount
// points, network
// interfaces, addresses, routes and rules, cgroups, network namespaces and the entries of the
// directories a node uses.
type snapshot map[string]bool

// volatileSysctls change by themselves.
var volatileSysctls = regexp.MustCompile(`^(fs\.(dentry-state|file-nr|inode-nr|inode-state|aio-nr|quota\..*)|kernel\.(random\..*|ns_last_pid|pty\.nr|perf_event_max_sample_rate|tainted)|net\.netfilter\.nf_conntrack_count|vm\.(nr_.*|stat_refresh)|net\.ipv[46]\.(route|neigh)\..*)$`)

var lifetimes = regexp.MustCompile(` (valid|preferred)_lft \S+`)

var nftCounters = regexp.MustCompile(`counter packets \d+ bytes \d+`)

// Directories are listed one level deep under the roots where a node's
// components could put something, and two levels deep where they do.
// Tests of other packages may run at the same time (go test ./...), so
// deeper listings of busy places would see their work.
var (
	watchedRoots = []string{"/run", "/var/run", "/var/lib", "/var/log", "/etc", "/opt", "/usr/libexec"}
	watchedDirs  = []string{"/var/lib/kubelet", "/var/lib/cni", "/var/lib/containerd", "/var/lib/varnishgw-testnode", "/run/containerd", "/run/netns", "/run/runc", "/var/log/containers", "/var/log/pods", "/etc/cni", "/etc/containerd", "/etc/kubernetes", "/opt/cni", "/opt/containerd", "/usr/libexec/kubernetes"}
)

// unwatched are what other work on this machine changes: package
// installs, and mounts under the temporary directory (image builds
// mount /proc in their chroots); the cgroups this machine's command
// runner makes for each command it starts (process_api), whoever runs
// it; and the node lock file, which stays (like any lock file).
var unwatched = regexp.MustCompile(`^(path: /(var/lib/(apt|dpkg|ucf|systemd)|var/log/(apt|journal|dpkg\.log|alternatives\.log)|run/(lock/varnishgw-testnode\.lock|systemd|user|mount|utmp|sshd))|mount: /(tmp|var/tmp)/|cgroup: /sys/fs/cgroup/[^/]+/process_api/)`)

func takeSnapshot(t *testing.T) snapshot {
	t.Helper()
	s := snapshot{}
	_ = filepath.WalkDir("/proc/sys", func(p string, d fs.DirEntry, err error) error { // unreadable parts are skipped inside
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Mode().Perm()&0o444 == 0 {
			return nil
		}
		name := strings.ReplaceAll(strings.TrimPrefix(p, "/proc/sys/"), "/", ".")
		if volatileSysctls.MatchString(name) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		s["sysctl: "+name+" = "+strings.Join(strings.Fields(string(data)), " ")] = true
		return nil
	})
	for _, save := range []string{"iptables-save", "ip6tables-save", "iptables-legacy-save", "ip6tables-legacy-save"} {
		if _, err := exec.LookPath(save); err != nil {
			continue
		}
		out, err := exec.Command(save).Output()
		if err != nil {
			t.Fatalf("%s: %v", save, err)
		}
		table := ""
		for _, line := range strings.Split(string(out), "\n") {
			switch {
			case line == "" || strings.HasPrefix(line, "#") || line == "COMMIT":
			case strings.HasPrefix(line, "*"):
				table = line[1:]
			case strings.HasPrefix(line, ":"):
				// ":CHAIN POLICY [packets:bytes]": the counters change.
				f := strings.Fields(line)
				s[save+": "+table+" "+f[0]+" "+f[1]] = true
			default:
				s[save+": "+table+" "+line] = true
			}
		}
	}
	if _, err := exec.LookPath("nft"); err == nil {
		out, err := exec.Command("nft", "list", "ruleset").Output()
		if err != nil {
			t.Fatalf("nft list ruleset: %v", err)
		}
		// Tables and chains by their nesting, rules without counters.
		var path []string
		for _, line := range strings.Split(string(out), "\n") {
			line = nftCounters.ReplaceAllString(strings.TrimSpace(line), "counter")
			switch {
			case line == "":
			case strings.HasSuffix(line, "{"):
				path = append(path, strings.TrimSuffix(line, " {"))
				s["nft: "+strings.Join(path, " / ")] = true
			case line == "}":
				if len(path) > 0 {
					path = path[:len(path)-1]
				}
			default:
				s["nft: "+strings.Join(path, " / ")+" / "+line] = true
			}
		}
	}
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mountinfo), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if f, fst := strings.Fields(pre), strings.Fields(post); ok && len(f) >= 5 && len(fst) > 0 {
			s["mount: "+f[4]+" ("+fst[0]+")"] = true
		}
	}
	links, _ := os.ReadDir("/sys/class/net")
	for _, l := range links {
		s["link: "+l.Name()] = true
	}
	for _, args := range [][]string{{"-4", "route", "show", "table", "all"}, {"-6", "route", "show", "table", "all"}, {"-o", "addr"}, {"rule"}, {"-6", "rule"}} {
		out, err := exec.Command("ip", args...).Output()
		if err != nil {
			t.Fatalf("ip %v: %v", args, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if line = strings.Join(strings.Fields(line), " "); line != "" {
				// Address lifetimes count down.
				line = lifetimes.ReplaceAllString(line, "")
				s["ip "+strings.Join(args, " ")+": "+line] = true
			}
		}
	}
	cgroupRoots, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, root := range cgroupRoots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error { // unreadable parts are skipped inside
			if err == nil && d.IsDir() && p != root {
				s["cgroup: "+p] = true
			}
			return nil
		})
	}
	for _, dir := range append(watchedRoots, watchedDirs...) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			s["path: "+filepath.Join(dir, e.Name())] = true
		}
	}
	for k := range s {
		if unwatched.MatchString(k) {
			delete(s, k)
		}
	}
	return s
}

// diff lists what is only in a ("-") and only in b ("+"), sorted.
func (a snapshot) diff(b snapshot) []string {
	var out []string
	for k := range a {
		if !b[k] {
			out = append(out, "- "+k)
		}
	}
	for k := range b {
		if !a[k] {
			out = append(out, "+ "+k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][2:] < out[j][2:] })
	return out
}

// nodeProcess is a process of the node, by pid and start time (so that a
// reused pid does not count).
type nodeProcess struct {
	pid   int
	start string
	cmd   string
}

// nodeBinaries are the names of the node's programs, and of the pods'
// programs the tests run.
var nodeBinaries = regexp.MustCompile(`^(containerd|containerd-shim-runc-v2|runc|kubelet|kube-proxy|kube-controller-manager|kube-scheduler|pause|busybox)$`)

// nodeProcesses lists the processes that are the node's or its pods': in
// the node's cgroups, or running one of nodeBinaries.
func nodeProcesses() []nodeProcess {
	var out []nodeProcess
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		rest := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(rest) < 20 || rest[0] == "Z" {
			continue
		}
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if strings.Contains(string(cg), "/varnishgw-testnode") || nodeBinaries.MatchString(filepath.Base(strings.TrimSuffix(exe, " (deleted)"))) {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			out = append(out, nodeProcess{pid: pid, start: rest[19], cmd: strings.ReplaceAll(string(cmd), "\x00", " ")})
		}
	}
	return out
}

func alive(p nodeProcess) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return false
	}
	rest := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(rest) >= 20 && rest[0] != "Z" && rest[19] == p.start
}
