package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkIdleRSS reports the resident memory of an idle chaperone (not
// varnishd) in supervise mode: ready, routing loaded, /metrics scraped every
// second for 10 seconds. One iteration is one chaperone; the figure is the
// peak RSS (VmHWM) and the RSS at the end (VmRSS).
func BenchmarkIdleRSS(b *testing.B) {
	for b.Loop() {
		c := startChaperone(b, backend(b, "A"))
		for i := 0; i < 10; i++ {
			c.health("/metrics")
			time.Sleep(time.Second)
		}
		b.ReportMetric(procStatusKB(b, c.cmd.Process.Pid, "VmRSS"), "rss-kB")
		b.ReportMetric(procStatusKB(b, c.cmd.Process.Pid, "VmHWM"), "peak-rss-kB")
	}
}

func procStatusKB(b *testing.B, pid int, field string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
