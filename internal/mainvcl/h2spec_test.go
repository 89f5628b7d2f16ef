package mainvcl

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/toolsenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// h2specExpectedFailures are the h2spec cases (ID: group/section/number, as
// h2spec takes them on its command line) that fail against an HTTPS
// listener, keyed by Varnish version ("" is this machine's 7.1, "7.7" is
// Debian 13's), each with its reason. TestH2spec fails when a case outside
// the list fails (a regression) and when a listed case passes (the list must
// stay true). docs/guides/https.md (templates/guides/https.md.tmpl) shows
// the same table.
var h2specExpectedFailures = map[string]map[string]string{
	"": merge(h2specFailures, map[string]string{
		"http2/8.1.2.3/3": "a request without :scheme is accepted (7.4 made varnishd's HTTP/2 header checks stricter: 7.7 refuses it)",
		"http2/8.1.2.3/6": "a request with two :scheme fields is accepted (7.7 refuses it)",
	}),
	"7.7": h2specFailures,
}

// h2specFailures are the expected failures of both versions.
var h2specFailures = map[string]string{
	"generic/4/4":     "a POST with trailers: varnishd takes no request trailers over HTTP/2 and closes the connection at the trailing HEADERS frame",
	"hpack/4.2/1":     "a dynamic table size update at the end of a header block is not a COMPRESSION_ERROR: varnishd's HPACK decoder accepts it and answers the request",
	"http2/3.5/2":     "an invalid connection preface gets an HTTP/1.1 answer before the close, where h2spec wants the connection closed without one",
	"http2/5.1/8":     "DATA on a stream the client reset is ignored, not a STREAM_CLOSED error",
	"http2/5.1/11":    "DATA on a closed stream is ignored, not a STREAM_CLOSED error",
	"http2/5.3.1/1":   "a HEADERS frame that depends on its own stream is answered: varnishd ignores the priority (RFC 9113 deprecates the scheme) instead of a PROTOCOL_ERROR",
	"http2/5.3.1/2":   "a PRIORITY frame that depends on its own stream is ignored, not a PROTOCOL_ERROR",
	"http2/5.5/2":     "an unknown extension frame between HEADERS and CONTINUATION is not a connection error: varnishd goes on waiting for the CONTINUATION",
	"http2/6.3/2":     "a PRIORITY frame with a length other than 5 is ignored, not a FRAME_SIZE_ERROR",
	"http2/6.7/2":     "a PING with the ACK flag, which no PING of varnishd's asked for, closes the connection; h2spec wants it ignored and the next PING answered",
	"http2/8.1.2.1/4": "a pseudo-header after a regular header is accepted, the request taken as if in order: it reaches the backend as one plain HTTP/1.1 request (TestHTTP2ConnectionSpecificHeaders)",
	"http2/8.1.2.2/1": "answered 400 by main.vcl, not a stream error: varnishd's HTTP/2 parser accepts a Connection field",
	"http2/8.1.2.2/2": "answered 400 by main.vcl, not a stream error: varnishd's HTTP/2 parser accepts TE other than trailers",
}

// merge is a copy of a with b's entries added.
func merge(a, b map[string]string) map[string]string {
	m := maps.Clone(a)
	maps.Copy(m, b)
	return m
}

// TestH2spec runs h2spec, the independent HTTP/2 conformance suite
// (github.com/summerwind/h2spec, built by make setup from tools/h2spec),
// against an HTTPS listener as the gateway runs it, all real: hitch with
// ALPN h2 and http/1.1 in front of varnishd (HTTP/2 on) with ghost and
// rendered main.vcl, routing to a Go backend. It compares the failing cases
// with h2specExpectedFailures.
func TestH2spec(t *testing.T) {
	if err := toolsenv.Missing("VARNISHGW_H2SPEC"); err != nil {
		t.Fatal(err)
	}
	bin := os.Getenv("VARNISHGW_H2SPEC")
	gw := startH2Gateway(t)
	report := filepath.Join(t.TempDir(), "h2spec.xml")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-h", "127.0.0.1", "-p", gw.port, "-t", "-k", "-j", report)
	out, err := cmd.CombinedOutput()
	// h2spec exits 1 when a case fails: the report says which.
	if ctx.Err() != nil || (err != nil && cmd.ProcessState.ExitCode() != 1) {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	passed, failed, err := parseH2specReport(report)
	if err != nil {
		t.Fatalf("%v\nh2spec output:\n%s", err, out)
	}
	version := varnishdtest.Varnish(t)
	t.Logf("h2spec against Varnish %q: %d of %d passed", version, len(passed), len(passed)+len(failed))
	expected := h2specExpectedFailures[version]
	var ids []string
	for id := range failed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if _, ok := expected[id]; !ok {
			t.Errorf("h2spec %s fails and is not in h2specExpectedFailures[%q]: %s", id, version, failed[id])
		}
	}
	for id, reason := range expected {
		if _, ok := failed[id]; ok {
			continue
		}
		if slices.Contains(passed, id) {
			t.Errorf("h2spec %s passes: take it off h2specExpectedFailures[%q] (%s)", id, version, reason)
		} else {
			t.Errorf("h2spec %s is in h2specExpectedFailures[%q] but h2spec ran no such case", id, version)
		}
	}
	if t.Failed() {
		t.Logf("h2spec output:\n%s", out)
	}
}

// parseH2specReport reads h2spec's JUnit report: the IDs of the cases that
// passed, and those that failed with what h2spec said. A case's ID is its
// group's (the testsuite's package, "http2/8.1.2.1") and its number in the
// group from 1, as h2spec numbers them; skipped cases are neither.
func parseH2specReport(path string) (passed []string, failed map[string]string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var r struct {
		Suites []struct {
			Package string `xml:"package,attr"`
			Cases   []struct {
				Desc    string    `xml:"classname,attr"`
				Failure *struct{} `xml:"failure"`
				Error   *struct {
					Content string `xml:",chardata"`
				} `xml:"error"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	// h2spec writes what the server sent into error texts as it came,
	// NULs and all, which XML does not allow.
	data = bytes.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' {
			return ' '
		}
		return r
	}, data)
	if err := xml.Unmarshal(data, &r); err != nil {
		return nil, nil, fmt.Errorf("h2spec report %s: %w", path, err)
	}
	failed = map[string]string{}
	for _, s := range r.Suites {
		for i, c := range s.Cases {
			id := fmt.Sprintf("%s/%d", s.Package, i+1)
			switch {
			case c.Skipped != nil:
			case c.Failure != nil || c.Error != nil:
				msg := c.Desc
				if c.Error != nil {
					msg += ": " + strings.Join(strings.Fields(c.Error.Content), " ")
				}
				failed[id] = msg
			default:
				passed = append(passed, id)
			}
		}
	}
	if len(passed)+len(failed) == 0 {
		return nil, nil, fmt.Errorf("h2spec report %s has no cases", path)
	}
	return passed, failed, nil
}
