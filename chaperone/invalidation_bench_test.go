package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// BenchmarkInvalidationEverywhere (make bench-invalidation) measures the
// time from creating a CacheInvalidation to the moment both pods of a
// Gateway (two chaperone + varnishd pairs on the test API server) have
// acknowledged it in their GatewayPodReports, polled every 5 ms, over
// BENCH_INVALIDATIONS invalidations (default 20) one after the other. It
// prints and reports the median and the 90th percentile.
func BenchmarkInvalidationEverywhere(b *testing.B) {
	n := 20
	if v, err := strconv.Atoi(os.Getenv("BENCH_INVALIDATIONS")); err == nil && v > 0 {
		n = v
	}
	g, _ := startCacheGateway(b, false)
	ctx := context.Background()
	for _, p := range g.pods {
		p.fetch("/tagged/bench") // one tagged object in each cache
	}
	b.ResetTimer()
	for range b.N {
		var times []time.Duration
		for i := range n {
			start := time.Now()
			obj := g.create(b, vgwapi.InvalidationSpec{Tags: []string{"bench"}, Purges: []vgwapi.Purge{{Host: "app.example.com", Path: fmt.Sprintf("/p/%d", i)}}})
			uid := string(obj.GetUID())
			for {
				reports, err := vgwapi.ReadReports(ctx, g.dyn, g.gw)
				if err != nil {
					b.Fatal(err)
				}
				done := true
				for _, p := range g.pods {
					if ack := reports[p.name].Invalidation(uid); ack == nil {
						done = false
					} else if ack.Bans != 2 {
						b.Fatalf("%s acknowledged %+v, want 2 bans", p.name, ack)
					}
				}
				if done {
					break
				}
				if time.Since(start) > 30*time.Second {
					b.Fatalf("invalidation %d not acknowledged by both pods within 30 s", i)
				}
				time.Sleep(5 * time.Millisecond)
			}
			times = append(times, time.Since(start))
		}
		slices.Sort(times)
		median, p90 := times[len(times)/2], times[len(times)*9/10]
		fmt.Printf("invalidation applied by both pods: median %s, p90 %s, max %s over %d invalidations\n",
			median.Round(time.Millisecond), p90.Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond), n)
		b.ReportMetric(float64(median.Microseconds())/1000, "ms-median")
		b.ReportMetric(float64(p90.Microseconds())/1000, "ms-p90")
	}
}
