// Package logcheck checks the JSON log records of a program under test:
// every key once per object, at any depth.
package logcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
)

// DuplicateKeys returns the keys that a JSON object (a log record) has more
// than once, at any depth, as dotted paths.
func DuplicateKeys(line []byte) []string {
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

// Records fails the test for every JSON record in out (a program's
// stderr and stdout, one record a line) that has a key more than once.
func Records(t testing.TB, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		if dups := DuplicateKeys([]byte(line)); len(dups) > 0 {
			t.Errorf("log record with keys %v more than once: %s", dups, line)
		}
	}
}
