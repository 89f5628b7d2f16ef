package accesslog

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestWriteKeepsEveryLineJSON: what varnishncsa -j may write (bytes that
// are not UTF-8 inside a string, or, for an incomplete transaction, a line
// that is not JSON) comes out as one valid JSON object per line.
func TestWriteKeepsEveryLineJSON(t *testing.T) {
	var out bytes.Buffer
	l := New(Config{Out: &out})
	for _, in := range []string{
		`{"status":200,"user_agent":"ok"}` + "\n",
		"{\"status\":200,\"user_agent\":\"a\xff\xfeb\"}\n",
		`{"status":,"url":"/x"}` + "\n",
		"not json at all\r\n",
	} {
		l.write([]byte(in))
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), out.String())
	}
	var recs []map[string]any
	for _, line := range lines {
		if !utf8.ValidString(line) {
			t.Errorf("not UTF-8: %q", line)
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("not a JSON object: %v: %q", err, line)
		}
		recs = append(recs, rec)
	}
	if recs[1]["user_agent"] != "a\uFFFDb" {
		t.Errorf("repaired user_agent = %q, want a\\uFFFDb (one per run of bad bytes)", recs[1]["user_agent"])
	}
	if recs[2]["line"] != `{"status":,"url":"/x"}` || recs[2]["access_log_error"] == nil {
		t.Errorf("invalid line written as %v, want an access_log_error record with the line", recs[2])
	}
	if v := testutil.ToFloat64(l.invalid); v != 2 {
		t.Errorf("invalid lines = %v, want 2", v)
	}
	if v := testutil.ToFloat64(l.lines); v != 4 {
		t.Errorf("lines = %v, want 4", v)
	}
}
