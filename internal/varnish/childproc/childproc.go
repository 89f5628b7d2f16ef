// Package childproc starts the chaperone's helper processes (varnishstat,
// varnishncsa) so that none of them outlives the chaperone, however it
// ends:
//
//   - a parent-death signal (SIGKILL) kills the child when the chaperone
//     dies, even by SIGKILL, as long as the child does not change its
//     credentials (varnishstat and varnishncsa do not; varnishd's manager
//     does when run as root, which clears the signal: see internal/varnish/varnishd);
//   - each child leads its own process group, so that a Ctrl-C in a terminal
//     reaches the chaperone only, and the chaperone ends a child with
//     everything the child started by killing the group;
//   - when the context of a command ends (the chaperone exits, a read times
//     out), the group is killed and Wait returns within WaitDelay.
package childproc

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

// WaitDelay bounds how long Wait waits for a killed child's output pipes.
const WaitDelay = 5 * time.Second

// Command is exec.CommandContext with the settings above.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return KillGroup(cmd) }
	cmd.WaitDelay = WaitDelay
	return cmd
}

// KillGroup kills the process group a started cmd leads.
func KillGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
