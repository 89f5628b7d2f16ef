package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// TestChildrenDieWithTheChaperone kills the chaperone with SIGKILL while a
// varnishstat read hangs (a varnishstat waiting for varnishd's shared
// memory does so for up to 5 s; here it hangs for 5 minutes) and checks that
// no varnishstat it started remains.
func TestChildrenDieWithTheChaperone(t *testing.T) {
	dir := varnishdtest.Dir(t)
	pids := filepath.Join(dir, "varnishstat.pids")
	hang := filepath.Join(dir, "hang")
	// A varnishstat that records its pid and, once the hang file exists,
	// hangs instead of reading (exec keeps the pid the chaperone started).
	wrapper := filepath.Join(dir, "varnishstat")
	chaperonetest.WriteFile(t, wrapper, fmt.Sprintf("#!/bin/sh\necho $$ >> %s\n[ -e %s ] && exec sleep 300\nexec %s \"$@\"\n",
		pids, hang, varnishdtest.StatBin(t)))
	must(t, os.Chmod(wrapper, 0o755))

	c := startChaperone(t, chaperonetest.Backend(t, "A"), "--varnishstat", wrapper)
	c.wantTraffic("A", "v1")
	// varnishd's manager and cache child, killed by the test: run as root
	// varnishd changes credentials, which clears a parent-death signal
	// (design/chaperone.md).
	varnishPids := varnishdtest.Descendants(c.Cmd.Process.Pid)
	t.Cleanup(func() {
		for _, pid := range varnishPids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	chaperonetest.WriteFile(t, hang, "")
	var hung int
	c.WaitFor("a hanging varnishstat", 30*time.Second, func() bool {
		for _, pid := range readPids(t, pids) {
			if comm(pid) == "sleep" {
				hung = pid
				return true
			}
		}
		return false
	})
	must(t, syscall.Kill(c.Cmd.Process.Pid, syscall.SIGKILL))
	<-c.Exited
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for _, pid := range readPids(t, pids) {
			if n := comm(pid); n != "" {
				left = append(left, fmt.Sprintf("%d (%s)", pid, n))
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the chaperone was killed its varnishstat children %v still run (the hanging one was %d)", left, hung)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func readPids(t testing.TB, path string) []int {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// comm is the command name of a running process, "" when it is gone or a
// zombie.
func comm(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(stat)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open || close+2 >= len(s) || s[close+2] == 'Z' {
		return ""
	}
	return s[open+1 : close]
}
