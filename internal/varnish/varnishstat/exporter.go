package varnishstat

import (
	"regexp"
	"strings"

	"github.com/prometheus/common/model"
)

// Exporter names: the metric names and labels of Debian's
// prometheus-varnish-exporter (jonnenauha/prometheus_varnish_exporter
// 1.6.1, Debian 12's), which Varnish users' dashboards query. The
// collector exports every counter it reads under these names too, beside
// the project's own (Collector). The rules, as that exporter applies them
// to `varnishstat -j` of Varnish 6.5 and later:
//
//   - the group is the counter's type when it is VBE (as "backend"),
//     MEMPOOL, LCK, SMA, SMF, MGT or MAIN, else "main"; the name is
//     varnish_GROUP_FIELD, lower case, without "_total";
//   - a counter with more than two parts has an identity, the parts
//     between the type and the field (lower case): a label "id", "type"
//     for SMA and SMF, "target" for the LCK counters it renames
//     (colls, creat, destroy, locks become varnish_lock_collisions,
//     _created, _destroyed, _operations), and for VBE the labels
//     "backend" (the identity without a leading "boot." or "reload_*.")
//     and "server" ("unknown" unless the identity has a UUID or a
//     parenthesised server);
//   - MAIN.fetch_X becomes varnish_main_fetch{type="X"} and MAIN.s_fetch
//     varnish_main_fetch_total; MAIN.sess_X varnish_main_sessions{type="X"}
//     and MAIN.s_sess varnish_main_sessions_total; MAIN.n_wrk_X
//     varnish_main_worker_threads{type="X"};
//   - flag c (and a) is a counter, anything else a gauge;
//   - varnish_backend_up is 1 when the last health probe of a VBE's
//     happy bitmap succeeded; varnish_up is 1 after a good read;
//     varnish_version{major, minor, patch, revision, version} is 1;
//   - when VCLs named reload_* exist (varnishreload's names), only the VBE
//     counters of the newest are exported.
//
// Not exported under these names: ghost's GHOST.* and GHOSTROUTER.*
// counters, which that exporter would turn into one family per vhost with
// the hostname in the metric name; they are varnish_ghost_* and
// varnish_ghostrouter_* (Collector).

var exporterGroups = []struct{ name, prefix string }{
	{"backend", "vbe."},
	{"mempool", "mempool."},
	{"lck", "lck."},
	{"sma", "sma."},
	{"smf", "smf."},
	{"mgt", "mgt."},
	{"main", "main."},
}

var exporterRenames = map[string]string{
	"varnish_lck_colls":   "varnish_lock_collisions",
	"varnish_lck_creat":   "varnish_lock_created",
	"varnish_lck_destroy": "varnish_lock_destroyed",
	"varnish_lck_locks":   "varnish_lock_operations",
}

// exporterIdentityLabel is the label of an identity when it is not "id".
func exporterIdentityLabel(name string) string {
	switch {
	case strings.HasPrefix(name, "varnish_lock_"):
		return "target"
	case strings.HasPrefix(name, "varnish_sma_"), strings.HasPrefix(name, "varnish_smf_"):
		return "type"
	}
	return "id"
}

var exporterGroupings = []struct{ prefix, newPrefix, total, help string }{
	{"main_fetch", "main_fetch", "main_s_fetch", "Number of fetches"},
	{"main_sess", "main_sessions", "main_s_sess", "Number of sessions"},
	{"main_n_wrk", "main_worker_threads", "main_n_wrk", "Number of worker threads"},
}

var (
	backendUUID  = regexp.MustCompile(`([[0-9A-Za-z]{8}-[0-9A-Za-z]{4}-[0-9A-Za-z]{4}-[89ABab][0-9A-Za-z]{3}-[0-9A-Za-z]{12})(.*)`)
	backendParen = regexp.MustCompile(`(.*)\((.*)\)`)
)

// exporterName maps a counter to the exporter's name, help and labels; ok
// is false for counters it does not export (ghost's).
func exporterName(counter, description string) (m promName, help string, ok bool) {
	if strings.HasPrefix(counter, "GHOST.") || strings.HasPrefix(counter, "GHOSTROUTER.") {
		return promName{}, "", false
	}
	lower := strings.ToLower(counter)
	group, rest := "main", lower
	for _, g := range exporterGroups {
		if strings.HasPrefix(lower, g.prefix) {
			group, rest = g.name, lower[len(g.prefix):]
			break
		}
	}
	var ident string
	if strings.Count(counter, ".") > 1 {
		ident = rest[:strings.LastIndex(rest, ".")]
	}
	fq := lower
	if ident != "" {
		fq = strings.ReplaceAll(fq, "."+ident, "")
	}
	for _, g := range exporterGroups {
		if strings.HasPrefix(fq, g.prefix) {
			fq = fq[len(g.prefix):]
			break
		}
	}
	name := "varnish_" + group + "_" + strings.ReplaceAll(fq, ".", "_")
	if r, ok := exporterRenames[name]; ok {
		name = r
	}
	help = description
	if ident != "" {
		if group == "backend" {
			backend, server := cleanBackendName(ident), "unknown"
			if h := backendUUID.FindStringSubmatch(ident); h != nil {
				backend, server = cleanBackendName(h[2]), h[1]
			} else if h := backendParen.FindStringSubmatch(ident); h != nil {
				backend, server = cleanBackendName(h[1]), strings.Replace(h[2], ",,", ":", 1)
			}
			m.labels, m.values = []string{"backend", "server"}, []string{backend, server}
		} else {
			m.labels, m.values = []string{exporterIdentityLabel(name)}, []string{ident}
		}
	}
	for _, g := range exporterGroupings {
		prefix := "varnish_" + g.prefix
		if name == "varnish_"+g.total {
			name, help = "varnish_"+g.newPrefix+"_total", g.help
			break
		}
		if len(name) > len(prefix)+1 && strings.HasPrefix(name, prefix+"_") {
			m.labels = append(m.labels, "type")
			m.values = append(m.values, name[len(prefix)+1:])
			name, help = "varnish_"+g.newPrefix, g.help
			break
		}
	}
	m.name = name
	if !model.LegacyValidation.IsValidMetricName(name) {
		return promName{}, "", false
	}
	return m, help, true
}

// cleanBackendName drops the VCL name varnishd and varnishreload put before
// a backend's name: "boot.", "root:" and "reload_<date>.".
func cleanBackendName(name string) string {
	name = strings.Trim(name, ".")
	for _, prefix := range []string{"boot.", "root:"} {
		if strings.HasPrefix(strings.ToLower(name), prefix) {
			name = name[len(prefix):]
		}
	}
	if strings.HasPrefix(name, "reload_") {
		if dot := strings.Index(name, "."); dot >= 0 {
			name = name[dot+1:]
		}
	}
	return name
}

// newestReloadPrefix is the VBE prefix of the newest VCL named reload_*
// ("VBE.reload_20240101_120000_123"), "" when there is none.
func newestReloadPrefix(counters map[string]Counter) string {
	const vbeReload = "VBE.reload_"
	newest := ""
	for name := range counters {
		if !strings.HasPrefix(name, vbeReload) || !strings.HasSuffix(name, ".happy") {
			continue
		}
		dot := strings.Index(name[len(vbeReload):], ".")
		if dot < 0 {
			continue
		}
		if p := name[:len(vbeReload)+dot]; p > newest {
			newest = p
		}
	}
	return newest
}

var versionRE = regexp.MustCompile(`(?P<major>\d+)(\.(?P<minor>\d+))?(\.(?P<patch>\d+))?(.*revision\s(?P<revision>[0-9a-f]*)\))?`)

// versionLabels are the labels of varnish_version for the first line of
// `varnishstat -V` ("varnishstat (varnish-7.1.1 revision 7cee1c5...)").
func versionLabels(line string) (keys, values []string, ok bool) {
	m := versionRE.FindStringSubmatch(line)
	if m == nil {
		return nil, nil, false
	}
	parts := map[string]string{}
	for i, n := range versionRE.SubexpNames() {
		if n != "" && m[i] != "" {
			parts[n] = m[i]
		}
	}
	if parts["major"] == "" {
		return nil, nil, false
	}
	var nums []string
	for _, k := range []string{"major", "minor", "patch"} {
		if v := parts[k]; v != "" {
			keys, values = append(keys, k), append(values, v)
			nums = append(nums, v)
		}
	}
	if v := parts["revision"]; v != "" {
		keys, values = append(keys, "revision"), append(values, v)
	}
	keys, values = append(keys, "version"), append(values, strings.Join(nums, "."))
	return keys, values, true
}
