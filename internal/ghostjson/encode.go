package ghostjson

import (
	"encoding/json"
	"io"
	"strconv"
)

// encoder writes a Document in ghost.json's layout: the skeleton (the
// document object, its arrays and the vhost objects) by hand, and each
// entry (socket, backend, cache policy, route) with encoding/json on one
// line, HTML escaping off. Each backend's endpoints are written once, in
// the table: routes only name backends.
type encoder struct {
	buf  appender // the chunk being written
	done [][]byte // full chunks (Marshal)
	size int      // bytes in done
	w    io.Writer
	err  error         // the first error
	json *json.Encoder // writes entries into buf
}

// appender is a []byte that encoding/json writes into.
type appender []byte

func (a *appender) Write(p []byte) (int, error) {
	*a = append(*a, p...)
	return len(p), nil
}

func newEncoder() *encoder {
	e := &encoder{buf: make(appender, 0, 4096)}
	e.json = json.NewEncoder(&e.buf)
	e.json.SetEscapeHTML(false)
	return e
}

// value appends v as encoding/json writes it, without the newline.
func (e *encoder) value(v any) {
	if e.err != nil {
		return
	}
	if err := e.json.Encode(v); err != nil {
		e.err = err
		return
	}
	e.buf = e.buf[:len(e.buf)-1]
}

func (e *encoder) document(d *Document) {
	e.buf = append(e.buf, "{\n  \"version\": "...)
	e.buf = strconv.AppendInt(e.buf, int64(d.Version), 10)
	if len(d.Sockets) > 0 {
		e.buf = append(e.buf, ",\n  \"sockets\": "...)
		entries(e, d.Sockets, "    ", func(s *Socket) any { return s })
	}
	e.buf = append(e.buf, ",\n  \"backends\": "...)
	entries(e, d.Backends, "    ", plainBackend)
	if len(d.CachePolicies) > 0 {
		e.buf = append(e.buf, ",\n  \"cachePolicies\": "...)
		entries(e, d.CachePolicies, "    ", func(c *CachePolicy) any { return c })
	}
	if d.EscapedSlashes != "" {
		e.buf = append(e.buf, ",\n  \"escapedSlashes\": "...)
		e.value(d.EscapedSlashes)
	}
	e.buf = append(e.buf, ",\n  \"vhosts\": "...)
	if len(d.VHosts) == 0 {
		e.buf = append(e.buf, "[]\n}\n"...)
		return
	}
	e.buf = append(e.buf, "[\n"...)
	for i := range d.VHosts {
		v := &d.VHosts[i]
		e.buf = append(e.buf, "    {\n      \"hostname\": "...)
		e.value(v.Hostname)
		if len(v.Listeners) > 0 {
			e.buf = append(e.buf, ",\n      \"listeners\": ["...)
			for j, l := range v.Listeners {
				if j > 0 {
					e.buf = append(e.buf, ", "...)
				}
				e.value(l)
			}
			e.buf = append(e.buf, ']')
		}
		e.buf = append(e.buf, ",\n      \"routes\": "...)
		entries(e, v.Routes, "        ", plainRoute)
		e.buf = append(e.buf, "\n    }"...)
		if i < len(d.VHosts)-1 {
			e.buf = append(e.buf, ',')
		}
		e.buf = append(e.buf, '\n')
	}
	e.buf = append(e.buf, "  ]\n}\n"...)
}

// entries writes list as a JSON array of one entry per line, each after
// indent, the closing bracket two spaces less indented; an empty list is
// []. entry gives what encoding/json writes for an element.
func entries[T any](e *encoder, list []T, indent string, entry func(*T) any) {
	if len(list) == 0 {
		e.buf = append(e.buf, "[]"...)
		return
	}
	e.buf = append(e.buf, "[\n"...)
	for i := range list {
		e.buf = append(e.buf, indent...)
		e.value(entry(&list[i]))
		if i < len(list)-1 {
			e.buf = append(e.buf, ',')
		}
		e.buf = append(e.buf, '\n')
		e.flush()
	}
	e.buf = append(e.buf, indent[2:]...)
	e.buf = append(e.buf, ']')
}

// backendJSON is Backend without its MarshalJSON method.
type backendJSON Backend

// plainBackend is b as ghost.json holds it: a missing endpoint list is
// [], as the schema requires.
func plainBackend(b *Backend) any {
	if b.Endpoints == nil {
		c := *b
		c.Endpoints = []Endpoint{}
		b = &c
	}
	return (*backendJSON)(b)
}

// plainRoute is r as ghost.json holds it: timeouts that are all zero are
// left out, as absent ones are.
func plainRoute(r *Route) any {
	if r.Timeouts != nil && *r.Timeouts == (Timeouts{}) {
		c := *r
		c.Timeouts = nil
		return &c
	}
	return r
}

// chunkSize is the size of the output chunks: writing into chunks and
// joining them once avoids copying a large buffer every time it grows.
const chunkSize = 1 << 20

func (e *encoder) flush() {
	if len(e.buf) < chunkSize-chunkSize/8 {
		return
	}
	if e.w != nil {
		if e.err == nil {
			_, e.err = e.w.Write(e.buf)
		}
		e.buf = e.buf[:0]
		return
	}
	e.done = append(e.done, e.buf)
	e.size += len(e.buf)
	e.buf = make(appender, 0, chunkSize)
}

// bytes returns the whole output.
func (e *encoder) bytes() []byte {
	if len(e.done) == 0 {
		return e.buf
	}
	out := make([]byte, 0, e.size+len(e.buf))
	for _, c := range e.done {
		out = append(out, c...)
	}
	return append(out, e.buf...)
}
