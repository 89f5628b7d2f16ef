package routing

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// fillAll sets every field of v, which is settable, recursively: strings,
// numbers and bools to values that differ field by field, pointers to
// filled values, slices to one filled element. A struct type within
// itself (a mirror's backend within a backend's filters) is filled once
// more and left zero deeper down.
func fillAll(t *testing.T, v reflect.Value, n *int) {
	t.Helper()
	fill(t, v, n, map[reflect.Type]int{})
}

func fill(t *testing.T, v reflect.Value, n *int, open map[reflect.Type]int) {
	t.Helper()
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + string(rune('a'+*n%26)) + string(rune('a'+*n/26%26)))
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		if open[v.Type().Elem()] > 1 {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), n, open)
	case reflect.Slice:
		if open[v.Type().Elem()] > 1 {
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0), n, open)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(*n) * time.Second)))
			return
		}
		open[v.Type()]++
		defer func() { open[v.Type()]-- }()
		for i := range v.NumField() {
			if !v.Type().Field(i).IsExported() {
				t.Fatalf("%s has the unexported field %s: fillAll cannot set it", v.Type(), v.Type().Field(i).Name)
			}
			fill(t, v.Field(i), n, open)
		}
	default:
		t.Fatalf("fillAll: no rule for %s (kind %s)", v.Type(), v.Kind())
	}
}

// TestFragmentFormatRoundTrip checks that the conversions carry every
// field both ways: a field added to Fragment (or to a ghostjson or Gateway
// API type it holds) that the stored format does not carry fails here,
// as does a field of the stored format the conversions leave out.
func TestFragmentFormatRoundTrip(t *testing.T) {
	t.Run("Fragment", func(t *testing.T) {
		var f Fragment
		fillAll(t, reflect.ValueOf(&f).Elem(), new(int))
		if back := fragmentToV1(&f).fragment(); !reflect.DeepEqual(back, &f) {
			t.Errorf("Fragment → stored → Fragment lost fields:\n got  %+v\n want %+v", back, &f)
		}
	})
	t.Run("stored", func(t *testing.T) {
		var s fragmentV1
		fillAll(t, reflect.ValueOf(&s).Elem(), new(int))
		if back := fragmentToV1(s.fragment()); !reflect.DeepEqual(back, &s) {
			t.Errorf("stored → Fragment → stored lost fields:\n got  %+v\n want %+v", back, &s)
		}
	})
	t.Run("nil and empty lists", func(t *testing.T) {
		for _, f := range []*Fragment{
			{},
			{Parents: []ParentStatus{}, Listeners: []AttachedListener{}, Rules: []Rule{}},
			{Rules: []Rule{{Filters: []Filter{}, Backends: []BackendRef{}}}},
		} {
			if back := fragmentToV1(f).fragment(); !reflect.DeepEqual(back, f) {
				t.Errorf("round trip of %+v gave %+v: null and [] must stay apart", f, back)
			}
		}
	})
}

// TestFragmentFormatJSON pins the stored JSON of a fragment with every
// field set (testdata/fragment-v1.json; -update rewrites it). It fails
// when a change of the stored types changes what clusters store: that
// is a new FragmentVersion, not an edit of this file.
func TestFragmentFormatJSON(t *testing.T) {
	var f Fragment
	fillAll(t, reflect.ValueOf(&f).Elem(), new(int))
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(fragmentToV1(&f)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "fragment-v1.json")
	// -update is the golden tests' flag (golden_test.go, package routing_test).
	if u := flag.Lookup("update"); u != nil && u.Value.String() == "true" {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestFragmentFormatJSON -update writes it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("the stored fragment JSON changed: it is what clusters hold, read by pods of other releases; keep it, or make it a new FragmentVersion\n got:\n%s\nwant:\n%s", buf.Bytes(), want)
	}
	var back fragmentV1
	dec := json.NewDecoder(bytes.NewReader(want))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&back); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	if got := back.fragment(); !reflect.DeepEqual(got, &f) {
		t.Errorf("decoding %s gave\n %+v\nwant\n %+v", path, got, &f)
	}
}
