package logcheck

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestDuplicateKeysFindsThem: a key repeated by slog's With, and nested
// repeats in objects and arrays, are found with their dotted paths.
func TestDuplicateKeysFindsThem(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).With("component", "a").With("component", "b").Info("x")
	if dups := DuplicateKeys(buf.Bytes()); len(dups) != 1 || dups[0] != "component" {
		t.Errorf("DuplicateKeys(%s) = %v, want [component]", buf.String(), dups)
	}
	if dups := DuplicateKeys([]byte(`{"a":{"b":1,"b":2},"c":[{"d":1,"d":1}]}`)); strings.Join(dups, ",") != "a.b,c.d" {
		t.Errorf("nested duplicates = %v, want [a.b c.d]", dups)
	}
}
