package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/logcheck"
)

func TestLogRecordsHaveEachKeyOnce(t *testing.T) {
	var buf bytes.Buffer
	root := slog.New(newLogHandler(&buf, slog.LevelDebug))
	// What the routing half does: the chaperone's logger names a
	// component, the package names its own under it.
	routing := root.With("component", "routing")
	sync := routing.With("component", "routingsync", "file", "/g.json")
	sync.Info("ghost reloaded", "generation", 2)
	sync.Info("call site wins", "file", "/other.json")
	sync.WithGroup("g").With("component", "inner").Info("grouped", "component", "call")
	routing.Info("parent unchanged")

	want := []string{
		`{"level":"INFO","msg":"ghost reloaded","component":"routingsync","file":"/g.json","generation":2}`,
		`{"level":"INFO","msg":"call site wins","component":"routingsync","file":"/other.json"}`,
		`{"level":"INFO","msg":"grouped","component":"routingsync","file":"/g.json","g":{"component":"call"}}`,
		`{"level":"INFO","msg":"parent unchanged","component":"routing"}`,
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d records, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, line := range lines {
		if dups := logcheck.DuplicateKeys([]byte(line)); len(dups) > 0 {
			t.Errorf("record %d has keys %v more than once: %s", i, dups, line)
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("record %d is not JSON: %v: %s", i, err, line)
		}
		delete(rec, "time")
		got, _ := json.Marshal(rec)
		var w map[string]any
		if err := json.Unmarshal([]byte(want[i]), &w); err != nil {
			t.Fatalf("want[%d] is not JSON: %v", i, err)
		}
		wantJSON, _ := json.Marshal(w)
		if string(got) != string(wantJSON) {
			t.Errorf("record %d = %s, want %s", i, got, wantJSON)
		}
	}
}
