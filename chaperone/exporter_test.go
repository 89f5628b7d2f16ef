package main

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// exporterBin is Debian's prometheus-varnish-exporter (chaperone/debian-packages.txt).
const exporterBin = "prometheus-varnish-exporter"

// TestExporterMetricNames runs Debian's prometheus-varnish-exporter
// (1.6.1 in Debian 12) against the varnishd of a chaperone and compares
// their /metrics: every family the exporter exports for the counters the
// chaperone reads is exported by the chaperone with the same name, type,
// label names and series (label values). With --stats-exclude= the
// chaperone reads every counter, VBE.* included (varnish_backend_*); with
// the default (VBE.* excluded) every family but varnish_backend_* is there.
// Not compared: ghost's counters (GHOST.*, GHOSTROUTER.*), which the
// chaperone exports as varnish_ghost_* only (design/chaperone.md).
func TestExporterMetricNames(t *testing.T) {
	bin, err := exec.LookPath(exporterBin)
	if err != nil {
		t.Fatalf("%s not found: run make setup (chaperone/debian-packages.txt installs Debian's prometheus-varnish-exporter)", exporterBin)
	}
	for _, tc := range []struct {
		name    string
		exclude []string
		absent  string // family prefix the chaperone leaves out
	}{
		{"every counter", []string{"--stats-exclude="}, ""},
		{"default", nil, "varnish_backend_"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startChaperone(t, chaperonetest.Backend(t, "A"), tc.exclude...)
			c.wantTraffic("A", "v1")
			exporterAddr := varnishdtest.FreeAddr(t)
			// The exporter panics on ghost's counters (GHOSTROUTER.<vcl>...
			// with the VCL name main-<date>-N in a metric name): its
			// varnishstat leaves them out.
			stat := filepath.Join(c.Dir, "varnishstat-no-ghost")
			chaperonetest.WriteFile(t, stat, fmt.Sprintf("#!/bin/sh\ncase \" $* \" in *\" -j \"*) exec %s \"$@\" -X 'GHOST.*' -X 'GHOSTROUTER.*';; esac\nexec %s \"$@\"\n",
				varnishdtest.StatBin(t), varnishdtest.StatBin(t)))
			must(t, os.Chmod(stat, 0o755))
			cmd := exec.Command(bin, "-n", filepath.Join(c.Dir, "work"), "-varnishstat-path", stat,
				"-web.listen-address", exporterAddr)
			var out chaperonetest.SyncBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			must(t, cmd.Start())
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				cmd.Process.Kill()
				if err := <-exited; t.Failed() {
					t.Logf("exporter: %v", err)
				}
				if t.Failed() {
					t.Logf("exporter output:\n%s", out.String())
				}
			})
			// Both read after the same traffic.
			for range 5 {
				c.get()
			}
			var theirs map[string]*dto.MetricFamily
			var lastErr error
			t.Cleanup(func() {
				if t.Failed() && lastErr != nil {
					st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
					t.Logf("last scrape of the exporter: %v; %s %v", lastErr, st, cmd.Args)
				}
			})
			c.WaitFor("the exporter's metrics", 30*time.Second, func() bool {
				theirs, err = scrape("http://" + exporterAddr + "/metrics")
				if err != nil {
					lastErr = err
				}
				return err == nil && theirs["varnish_main_client_req"] != nil
			})
			c.WaitFor("the chaperone's varnishd metrics", 30*time.Second, func() bool {
				ours, err := scrape("http://" + c.HealthAddr + "/metrics")
				return err == nil && ours["varnish_up"] != nil && ours["varnish_version"] != nil
			})
			ours, err := scrape("http://" + c.HealthAddr + "/metrics")
			must(t, err)

			compared, absent := 0, 0
			for _, name := range slices.Sorted(maps.Keys(theirs)) {
				f := theirs[name]
				if tc.absent != "" && strings.HasPrefix(name, tc.absent) {
					if ours[name] != nil {
						t.Errorf("%s exported although its counters are excluded", name)
					}
					absent++
					continue
				}
				o := ours[name]
				if o == nil {
					t.Errorf("the exporter's %s (%s) is missing from the chaperone's /metrics", name, f.GetHelp())
					continue
				}
				compared++
				if o.GetType() != f.GetType() {
					t.Errorf("%s: type %v, the exporter's is %v", name, o.GetType(), f.GetType())
				}
				if ol, fl := labelNames(o), labelNames(f); ol != fl {
					t.Errorf("%s: labels %s, the exporter's are %s", name, ol, fl)
				}
				if os, fs := seriesKeys(o), seriesKeys(f); !slices.Equal(os, fs) && name != "varnish_version" {
					t.Errorf("%s: series %v, the exporter's are %v", name, os, fs)
				}
			}
			if v, e := seriesKeys(ours["varnish_version"]), seriesKeys(theirs["varnish_version"]); !slices.Equal(v, e) {
				t.Errorf("varnish_version %v, the exporter's %v", v, e)
			}
			t.Logf("%d of the exporter's families compared, %d left out as documented", compared, absent)
			if compared < 100 {
				t.Errorf("only %d families compared, want the exporter's ~170", compared)
			}
			if tc.absent != "" && absent == 0 {
				t.Errorf("the exporter has no %s family to leave out: VBE counters missing from the test?", tc.absent)
			}
			if tc.absent == "" && ours["varnish_backend_req"] == nil {
				t.Error("no varnish_backend_req with every counter read")
			}
		})
	}
}

func scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	return p.TextToMetricFamilies(resp.Body)
}

func labelNames(f *dto.MetricFamily) string {
	seen := map[string]bool{}
	for _, m := range f.GetMetric() {
		var names []string
		for _, l := range m.GetLabel() {
			names = append(names, l.GetName())
		}
		sort.Strings(names)
		seen[strings.Join(names, ",")] = true
	}
	out := slices.Sorted(maps.Keys(seen))
	return strings.Join(out, " | ")
}

func seriesKeys(f *dto.MetricFamily) []string {
	var out []string
	for _, m := range f.GetMetric() {
		var kv []string
		for _, l := range m.GetLabel() {
			kv = append(kv, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(kv)
		out = append(out, "{"+strings.Join(kv, ",")+"}")
	}
	sort.Strings(out)
	return out
}
