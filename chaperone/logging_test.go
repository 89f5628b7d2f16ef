package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
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
		if dups := duplicateKeys([]byte(line)); len(dups) > 0 {
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

// TestDuplicateKeysFindsThem checks the checker the binary tests use.
func TestDuplicateKeysFindsThem(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).With("component", "a").With("component", "b").Info("x")
	if dups := duplicateKeys(buf.Bytes()); len(dups) != 1 || dups[0] != "component" {
		t.Errorf("duplicateKeys(%s) = %v, want [component]", buf.String(), dups)
	}
	if dups := duplicateKeys([]byte(`{"a":{"b":1,"b":2},"c":[{"d":1,"d":1}]}`)); strings.Join(dups, ",") != "a.b,c.d" {
		t.Errorf("nested duplicates = %v, want [a.b c.d]", dups)
	}
}

// duplicateKeys returns the keys that a JSON object (a log record) has more
// than once, at any depth, as dotted paths.
func duplicateKeys(line []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(line))
	var dups []string
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				key := fmt.Sprint(k)
				p := key
				if path != "" {
					p = path + "." + key
				}
				if seen[key] {
					dups = append(dups, p)
				}
				seen[key] = true
				if err := walk(p); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for dec.More() {
				if err := walk(path); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	if err := walk(""); err != nil && err != io.EOF {
		return append(dups, "(not JSON: "+err.Error()+")")
	}
	return dups
}

// checkLogRecords fails the test for every JSON record in out (the
// chaperone's stderr and stdout) that has a key more than once.
func checkLogRecords(t testing.TB, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		if dups := duplicateKeys([]byte(line)); len(dups) > 0 {
			t.Errorf("log record with keys %v more than once: %s", dups, line)
		}
	}
}
