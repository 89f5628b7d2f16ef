// Package applyconfig turns typed Kubernetes API values into their
// apply configurations (client-go's and the Gateway API's
// applyconfiguration packages). An apply configuration has the JSON form
// of its typed value, so one JSON round trip converts every field, and a
// field added to the API reaches the apply without a hand-written copy.
package applyconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Of returns the apply configuration T of the typed value v: v's JSON
// decoded into T, with unknown fields rejected (a field that T lacks would
// be silently dropped from the apply). Typed API values always encode and
// their apply configurations have every field, so an error is a bug in
// the caller's choice of T: Of panics with it.
func Of[T any](v any) *T {
	out, err := From[T](v)
	if err != nil {
		panic(err)
	}
	return out
}

// From is Of with the error returned.
func From[T any](v any) (*T, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	out := new(T)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return nil, fmt.Errorf("decode %T as %T: %w", v, out, err)
	}
	return out, nil
}
