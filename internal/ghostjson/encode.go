package ghostjson

import (
	"encoding/json"
	"io"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// encoder writes a Document. It caches the encoding of endpoint lists and
// filter lists by the identity of their backing arrays: Resolve shares them
// between all routes of a rule and all routes of a Service port.
type encoder struct {
	buf       []byte   // the chunk being written
	done      [][]byte // full chunks (Marshal)
	size      int      // bytes in done
	w         io.Writer
	err       error // the first write error (Encode)
	endpoints map[sliceID][]byte
	filters   map[sliceID][]byte
}

type sliceID struct {
	p unsafe.Pointer
	n int
}

func newEncoder() *encoder {
	return &encoder{buf: make([]byte, 0, 4096), endpoints: map[sliceID][]byte{}, filters: map[sliceID][]byte{}}
}

func (e *encoder) document(d *Document) error {
	e.buf = append(e.buf, "{\n  \"version\": "...)
	e.buf = strconv.AppendInt(e.buf, int64(d.Version), 10)
	if len(d.VHosts) == 0 {
		e.buf = append(e.buf, ",\n  \"vhosts\": []\n}\n"...)
		return nil
	}
	e.buf = append(e.buf, ",\n  \"vhosts\": [\n"...)
	for i := range d.VHosts {
		v := &d.VHosts[i]
		e.buf = append(e.buf, "    {\n      \"hostname\": "...)
		e.buf = appendString(e.buf, v.Hostname)
		if len(v.Listeners) > 0 {
			e.buf = append(e.buf, ",\n      \"listeners\": ["...)
			for j, l := range v.Listeners {
				if j > 0 {
					e.buf = append(e.buf, ", "...)
				}
				e.buf = appendString(e.buf, l)
			}
			e.buf = append(e.buf, ']')
		}
		if len(v.Routes) == 0 {
			e.buf = append(e.buf, ",\n      \"routes\": []"...)
		} else {
			e.buf = append(e.buf, ",\n      \"routes\": [\n"...)
			for j := range v.Routes {
				e.buf = append(e.buf, "        "...)
				if err := e.route(&v.Routes[j]); err != nil {
					return err
				}
				if j < len(v.Routes)-1 {
					e.buf = append(e.buf, ',')
				}
				e.buf = append(e.buf, '\n')
				e.flush()
			}
			e.buf = append(e.buf, "      ]"...)
		}
		e.buf = append(e.buf, "\n    }"...)
		if i < len(d.VHosts)-1 {
			e.buf = append(e.buf, ',')
		}
		e.buf = append(e.buf, '\n')
	}
	e.buf = append(e.buf, "  ]\n}\n"...)
	return nil
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
	{
		e.done = append(e.done, e.buf)
		e.size += len(e.buf)
		e.buf = make([]byte, 0, chunkSize)
	}
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

func (e *encoder) route(r *Route) error {
	e.buf = append(e.buf, '{')
	if r.Name != "" {
		e.buf = append(e.buf, `"name":`...)
		e.buf = appendString(e.buf, r.Name)
		e.buf = append(e.buf, ',')
	}
	if r.PrecedenceGroup != 0 {
		e.buf = append(e.buf, `"precedenceGroup":`...)
		e.buf = strconv.AppendInt(e.buf, int64(r.PrecedenceGroup), 10)
		e.buf = append(e.buf, ',')
	}
	e.buf = append(e.buf, `"match":{"path":{"type":`...)
	e.buf = appendString(e.buf, r.Match.Path.Type)
	e.buf = append(e.buf, `,"value":`...)
	e.buf = appendString(e.buf, r.Match.Path.Value)
	e.buf = append(e.buf, '}')
	if r.Match.Method != "" {
		e.buf = append(e.buf, `,"method":`...)
		e.buf = appendString(e.buf, r.Match.Method)
	}
	e.valueMatches(`,"headers":[`, r.Match.Headers)
	e.valueMatches(`,"queryParams":[`, r.Match.QueryParams)
	e.buf = append(e.buf, '}')
	if len(r.Filters) > 0 {
		id := sliceID{unsafe.Pointer(unsafe.SliceData(r.Filters)), len(r.Filters)}
		enc, ok := e.filters[id]
		if !ok {
			var err error
			if enc, err = json.Marshal(r.Filters); err != nil {
				return err
			}
			e.filters[id] = enc
		}
		e.buf = append(e.buf, `,"filters":`...)
		e.buf = append(e.buf, enc...)
	}
	if t := r.Timeouts; t != nil && (t.RequestMs != 0 || t.BackendRequestMs != 0) {
		e.buf = append(e.buf, `,"timeouts":{`...)
		if t.RequestMs != 0 {
			e.buf = append(e.buf, `"requestMs":`...)
			e.buf = strconv.AppendInt(e.buf, t.RequestMs, 10)
			if t.BackendRequestMs != 0 {
				e.buf = append(e.buf, ',')
			}
		}
		if t.BackendRequestMs != 0 {
			e.buf = append(e.buf, `"backendRequestMs":`...)
			e.buf = strconv.AppendInt(e.buf, t.BackendRequestMs, 10)
		}
		e.buf = append(e.buf, '}')
	}
	if len(r.Backends) > 0 {
		e.buf = append(e.buf, `,"backends":[`...)
		for i := range r.Backends {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.group(&r.Backends[i])
		}
		e.buf = append(e.buf, ']')
	}
	e.buf = append(e.buf, '}')
	return nil
}

func (e *encoder) valueMatches(prefix string, ms []ValueMatch) {
	if len(ms) == 0 {
		return
	}
	e.buf = append(e.buf, prefix...)
	for i, m := range ms {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = append(e.buf, `{"type":`...)
		e.buf = appendString(e.buf, m.Type)
		e.buf = append(e.buf, `,"name":`...)
		e.buf = appendString(e.buf, m.Name)
		e.buf = append(e.buf, `,"value":`...)
		e.buf = appendString(e.buf, m.Value)
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, ']')
}

func (e *encoder) group(g *BackendGroup) {
	e.buf = append(e.buf, '{')
	if g.Name != "" {
		e.buf = append(e.buf, `"name":`...)
		e.buf = appendString(e.buf, g.Name)
		e.buf = append(e.buf, ',')
	}
	e.buf = append(e.buf, `"weight":`...)
	e.buf = strconv.AppendInt(e.buf, int64(g.Weight), 10)
	e.buf = append(e.buf, `,"endpoints":`...)
	if len(g.Endpoints) == 0 {
		e.buf = append(e.buf, "[]}"...)
		return
	}
	id := sliceID{unsafe.Pointer(unsafe.SliceData(g.Endpoints)), len(g.Endpoints)}
	enc, ok := e.endpoints[id]
	if !ok {
		start := len(e.buf)
		e.buf = append(e.buf, '[')
		for i, ep := range g.Endpoints {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, `{"address":`...)
			e.buf = appendString(e.buf, ep.Address)
			e.buf = append(e.buf, `,"port":`...)
			e.buf = strconv.AppendInt(e.buf, int64(ep.Port), 10)
			e.buf = append(e.buf, '}')
		}
		e.buf = append(e.buf, ']', '}')
		e.endpoints[id] = append([]byte(nil), e.buf[start:len(e.buf)-1]...)
		return
	}
	e.buf = append(e.buf, enc...)
	e.buf = append(e.buf, '}')
}

const hex = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json does with
// HTML escaping off: invalid UTF-8 becomes U+FFFD, U+2028 and U+2029 are
// escaped.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
