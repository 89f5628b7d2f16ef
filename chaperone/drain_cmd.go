package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/drain"
)

// drainCommand runs `chaperone drain`, the varnish container's preStop hook
// in sidecar mode: it asks the chaperone, through the drain socket, to
// drain varnishd and waits for the end. Exit status 0 only when the drain
// is done (no client session left, varnishd stopped); 1 with a message on
// stderr otherwise; 2 for bad arguments.
func drainCommand(args, env []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaperone drain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: chaperone drain [--socket=PATH] [--delay=DURATION] [--timeout=DURATION]")
		fmt.Fprintln(stderr, "Asks the chaperone to drain varnishd and waits until it is done (the varnish container's preStop hook in sidecar mode).")
		fs.PrintDefaults()
	}
	socket := drain.DefaultSocket
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, envName("drain-socket")+"="); ok && v != "" {
			socket = v
		}
	}
	fs.StringVar(&socket, "socket", socket, "the chaperone's drain socket (its --drain-socket; environment "+envName("drain-socket")+")")
	delay := fs.Duration("delay", 0, "wait this long before starting the drain, for the Service's endpoints to drop the pod")
	timeout := fs.Duration("timeout", 0, "give up after this long, with exit status 1 (0: wait for the chaperone's answer; the kubelet ends the hook at the pod's grace period)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "chaperone drain: unexpected argument %q: it takes flags only\n", fs.Arg(0))
		return 2
	}
	if err := drain.CheckSocketPath(socket); err != nil {
		fmt.Fprintf(stderr, "chaperone drain: --socket=%q: %v; give the chaperone's --drain-socket, e.g. --socket=%s\n", socket, err, drain.DefaultSocket)
		return 2
	}
	if *delay < 0 || *timeout < 0 {
		fmt.Fprintf(stderr, "chaperone drain: --delay=%s --timeout=%s: want 0 or more\n", *delay, *timeout)
		return 2
	}
	time.Sleep(*delay)
	ctx := context.Background()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	start := time.Now()
	answer, err := drain.Request(ctx, socket)
	if err != nil {
		fmt.Fprintf(stderr, "chaperone drain: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "chaperone drain: %s in %s\n", answer, time.Since(start).Round(time.Millisecond))
	return 0
}
