package ghostjson

import (
	"io"
	"strconv"
	"unicode/utf8"
)

// encoder writes a Document by hand, field by field, in the order of the
// types' fields and with encoding/json's omitempty rules, so that
// Unmarshal gives the document back. Each backend's endpoints are written
// once, in the table: routes only name backends.
type encoder struct {
	buf  []byte   // the chunk being written
	done [][]byte // full chunks (Marshal)
	size int      // bytes in done
	w    io.Writer
	err  error // the first write error (Encode)
}

func newEncoder() *encoder {
	return &encoder{buf: make([]byte, 0, 4096)}
}

func (e *encoder) document(d *Document) {
	e.buf = append(e.buf, "{\n  \"version\": "...)
	e.buf = strconv.AppendInt(e.buf, int64(d.Version), 10)
	if len(d.Sockets) > 0 {
		e.buf = append(e.buf, ",\n  \"sockets\": [\n"...)
		for i := range d.Sockets {
			e.buf = append(e.buf, "    "...)
			e.socket(&d.Sockets[i])
			if i < len(d.Sockets)-1 {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, '\n')
		}
		e.buf = append(e.buf, "  ]"...)
	}
	if len(d.Backends) == 0 {
		e.buf = append(e.buf, ",\n  \"backends\": []"...)
	} else {
		e.buf = append(e.buf, ",\n  \"backends\": [\n"...)
		for i := range d.Backends {
			e.buf = append(e.buf, "    "...)
			e.backend(&d.Backends[i])
			if i < len(d.Backends)-1 {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, '\n')
			e.flush()
		}
		e.buf = append(e.buf, "  ]"...)
	}
	if len(d.CachePolicies) > 0 {
		e.buf = append(e.buf, ",\n  \"cachePolicies\": [\n"...)
		for i := range d.CachePolicies {
			e.buf = append(e.buf, "    "...)
			e.cachePolicy(&d.CachePolicies[i])
			if i < len(d.CachePolicies)-1 {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, '\n')
			e.flush()
		}
		e.buf = append(e.buf, "  ]"...)
	}
	if d.EscapedSlashes != "" {
		e.buf = append(e.buf, ",\n  \"escapedSlashes\": "...)
		e.buf = appendString(e.buf, d.EscapedSlashes)
	}
	if len(d.VHosts) == 0 {
		e.buf = append(e.buf, ",\n  \"vhosts\": []\n}\n"...)
		return
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
				e.route(&v.Routes[j])
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
}

// socket writes s on one line, as encoding/json would.
func (e *encoder) socket(s *Socket) {
	e.buf = append(e.buf, `{"name":`...)
	e.buf = appendString(e.buf, s.Name)
	if s.TLS {
		e.buf = append(e.buf, `,"tls":true`...)
	}
	if len(s.Listeners) > 0 {
		e.buf = append(e.buf, `,"listeners":[`...)
		for i, l := range s.Listeners {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, `{"name":`...)
			e.buf = appendString(e.buf, l.Name)
			e.optString(`,"hostname":`, l.Hostname, false)
			e.buf = append(e.buf, '}')
		}
		e.buf = append(e.buf, ']')
	}
	e.buf = append(e.buf, '}')
}

func (e *encoder) backend(b *Backend) {
	e.buf = append(e.buf, `{"name":`...)
	e.buf = appendString(e.buf, b.Name)
	e.buf = append(e.buf, `,"endpoints":[`...)
	for i, ep := range b.Endpoints {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = append(e.buf, `{"address":`...)
		e.buf = appendString(e.buf, ep.Address)
		e.buf = append(e.buf, `,"port":`...)
		e.buf = strconv.AppendInt(e.buf, int64(ep.Port), 10)
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, ']')
	if b.WebSocket {
		e.buf = append(e.buf, `,"websocket":true`...)
	}
	e.buf = append(e.buf, '}')
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

func (e *encoder) route(r *Route) {
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
		e.buf = append(e.buf, `,"filters":[`...)
		for i := range r.Filters {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.filter(&r.Filters[i])
		}
		e.buf = append(e.buf, ']')
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
	if rt := r.Retry; rt != nil {
		e.buf = append(e.buf, `,"retry":{"attempts":`...)
		e.buf = strconv.AppendInt(e.buf, int64(rt.Attempts), 10)
		if rt.BackoffMs != 0 {
			e.buf = append(e.buf, `,"backoffMs":`...)
			e.buf = strconv.AppendInt(e.buf, rt.BackoffMs, 10)
		}
		if len(rt.Codes) > 0 {
			e.buf = append(e.buf, `,"codes":[`...)
			for i, c := range rt.Codes {
				if i > 0 {
					e.buf = append(e.buf, ',')
				}
				e.buf = strconv.AppendInt(e.buf, int64(c), 10)
			}
			e.buf = append(e.buf, ']')
		}
		e.buf = append(e.buf, '}')
	}
	if len(r.Backends) > 0 {
		e.buf = append(e.buf, `,"backends":[`...)
		for i, g := range r.Backends {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, `{"backend":`...)
			e.buf = appendString(e.buf, g.Backend)
			e.buf = append(e.buf, `,"weight":`...)
			e.buf = strconv.AppendInt(e.buf, int64(g.Weight), 10)
			if g.Unresolved != "" {
				e.buf = append(e.buf, `,"unresolved":`...)
				e.buf = appendString(e.buf, g.Unresolved)
			}
			if len(g.Filters) > 0 {
				e.buf = append(e.buf, `,"filters":[`...)
				for j := range g.Filters {
					if j > 0 {
						e.buf = append(e.buf, ',')
					}
					e.filter(&g.Filters[j])
				}
				e.buf = append(e.buf, ']')
			}
			e.buf = append(e.buf, '}')
		}
		e.buf = append(e.buf, ']')
	}
	if r.Cache != "" {
		e.buf = append(e.buf, `,"cache":`...)
		e.buf = appendString(e.buf, r.Cache)
	}
	if sp := r.Session; sp != nil {
		e.buf = append(e.buf, `,"sessionPersistence":{"type":`...)
		e.buf = appendString(e.buf, sp.Type)
		e.buf = append(e.buf, `,"name":`...)
		e.buf = appendString(e.buf, sp.Name)
		if sp.Path != "" {
			e.buf = append(e.buf, `,"path":`...)
			e.buf = appendString(e.buf, sp.Path)
		}
		e.buf = append(e.buf, `,"scope":`...)
		e.buf = appendString(e.buf, sp.Scope)
		if sp.AbsoluteTimeoutMs != 0 {
			e.buf = append(e.buf, `,"absoluteTimeoutMs":`...)
			e.buf = strconv.AppendInt(e.buf, sp.AbsoluteTimeoutMs, 10)
		}
		if sp.Permanent {
			e.buf = append(e.buf, `,"permanent":true`...)
		}
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, '}')
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

// filter writes f as encoding/json would (field order, omitempty).
func (e *encoder) filter(f *Filter) {
	e.buf = append(e.buf, `{"type":`...)
	e.buf = appendString(e.buf, f.Type)
	if f.RequestHeaderModifier != nil {
		e.buf = append(e.buf, `,"requestHeaderModifier":`...)
		e.headerModifier(f.RequestHeaderModifier)
	}
	if f.ResponseHeaderModifier != nil {
		e.buf = append(e.buf, `,"responseHeaderModifier":`...)
		e.headerModifier(f.ResponseHeaderModifier)
	}
	if rd := f.RequestRedirect; rd != nil {
		e.buf = append(e.buf, `,"requestRedirect":{`...)
		c := e.optString(`"scheme":`, rd.Scheme, false)
		c = e.optString(`"hostname":`, rd.Hostname, c)
		if rd.Port != 0 {
			e.comma(c)
			e.buf = append(e.buf, `"port":`...)
			e.buf = strconv.AppendInt(e.buf, int64(rd.Port), 10)
			c = true
		}
		if rd.Path != nil {
			e.comma(c)
			e.buf = append(e.buf, `"path":`...)
			e.pathModifier(rd.Path)
			c = true
		}
		if rd.StatusCode != 0 {
			e.comma(c)
			e.buf = append(e.buf, `"statusCode":`...)
			e.buf = strconv.AppendInt(e.buf, int64(rd.StatusCode), 10)
		}
		e.buf = append(e.buf, '}')
	}
	if rw := f.URLRewrite; rw != nil {
		e.buf = append(e.buf, `,"urlRewrite":{`...)
		c := e.optString(`"hostname":`, rw.Hostname, false)
		if rw.Path != nil {
			e.comma(c)
			e.buf = append(e.buf, `"path":`...)
			e.pathModifier(rw.Path)
		}
		e.buf = append(e.buf, '}')
	}
	if m := f.RequestMirror; m != nil {
		e.buf = append(e.buf, `,"requestMirror":{"backend":`...)
		e.buf = appendString(e.buf, m.Backend)
		e.optString(`"unresolved":`, m.Unresolved, true)
		if m.Percent != nil {
			e.buf = append(e.buf, `,"percent":`...)
			e.buf = strconv.AppendInt(e.buf, int64(*m.Percent), 10)
		}
		e.buf = append(e.buf, '}')
	}
	if c := f.CORS; c != nil {
		e.buf = append(e.buf, `,"cors":{`...)
		n := len(e.buf)
		e.strings(`,"allowOrigins":[`, c.AllowOrigins)
		e.strings(`,"allowMethods":[`, c.AllowMethods)
		e.strings(`,"allowHeaders":[`, c.AllowHeaders)
		e.strings(`,"exposeHeaders":[`, c.ExposeHeaders)
		if c.AllowCredentials {
			e.buf = append(e.buf, `,"allowCredentials":true`...)
		}
		if c.MaxAge != 0 {
			e.buf = append(e.buf, `,"maxAge":`...)
			e.buf = strconv.AppendInt(e.buf, int64(c.MaxAge), 10)
		}
		if len(e.buf) > n {
			// the first field's comma
			e.buf = append(e.buf[:n], e.buf[n+1:]...)
		}
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, '}')
}

func (e *encoder) headerModifier(h *HeaderModifier) {
	e.buf = append(e.buf, '{')
	c := e.headerValues(`"set":[`, h.Set, false)
	c = e.headerValues(`"add":[`, h.Add, c)
	if len(h.Remove) > 0 {
		e.comma(c)
		e.strings(`"remove":[`, h.Remove)
	}
	e.buf = append(e.buf, '}')
}

func (e *encoder) headerValues(prefix string, hs []HeaderValue, c bool) bool {
	if len(hs) == 0 {
		return c
	}
	e.comma(c)
	e.buf = append(e.buf, prefix...)
	for i, h := range hs {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = append(e.buf, `{"name":`...)
		e.buf = appendString(e.buf, h.Name)
		e.buf = append(e.buf, `,"value":`...)
		e.buf = appendString(e.buf, h.Value)
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, ']')
	return true
}

func (e *encoder) pathModifier(p *PathModifier) {
	e.buf = append(e.buf, `{"type":`...)
	e.buf = appendString(e.buf, p.Type)
	e.buf = append(e.buf, `,"value":`...)
	e.buf = appendString(e.buf, p.Value)
	e.buf = append(e.buf, '}')
}

// optString writes key and s unless s is empty (omitempty), after a comma
// when c says a field came before; it reports whether a field came before.
func (e *encoder) optString(key, s string, c bool) bool {
	if s == "" {
		return c
	}
	e.comma(c)
	e.buf = append(e.buf, key...)
	e.buf = appendString(e.buf, s)
	return true
}

func (e *encoder) comma(c bool) {
	if c {
		e.buf = append(e.buf, ',')
	}
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

// cachePolicy writes c on one line, in the field order of CachePolicy.
func (e *encoder) cachePolicy(c *CachePolicy) {
	e.buf = append(e.buf, `{"name":`...)
	e.buf = appendString(e.buf, c.Name)
	e.buf = append(e.buf, `,"ttlMs":`...)
	e.buf = strconv.AppendInt(e.buf, c.TTLMs, 10)
	if c.ForceTTL {
		e.buf = append(e.buf, `,"forceTtl":true`...)
	}
	if c.GraceMs != 0 {
		e.buf = append(e.buf, `,"graceMs":`...)
		e.buf = strconv.AppendInt(e.buf, c.GraceMs, 10)
	}
	if c.KeepMs != 0 {
		e.buf = append(e.buf, `,"keepMs":`...)
		e.buf = strconv.AppendInt(e.buf, c.KeepMs, 10)
	}
	if c.QueryKey != "" {
		e.buf = append(e.buf, `,"queryKey":`...)
		e.buf = appendString(e.buf, c.QueryKey)
	}
	e.strings(`,"queryParams":[`, c.QueryParams)
	e.strings(`,"keyHeaders":[`, c.KeyHeaders)
	e.strings(`,"stripCookies":[`, c.StripCookies)
	if c.AllowAuthorization {
		e.buf = append(e.buf, `,"allowAuthorization":true`...)
	}
	if c.TagHeader != "" {
		e.buf = append(e.buf, `,"tagHeader":`...)
		e.buf = appendString(e.buf, c.TagHeader)
	}
	if c.StatusHeader != "" {
		e.buf = append(e.buf, `,"statusHeader":`...)
		e.buf = appendString(e.buf, c.StatusHeader)
	}
	e.buf = append(e.buf, '}')
}

// strings writes open (a key and "[") and ss as a JSON array, nothing
// when ss is empty.
func (e *encoder) strings(open string, ss []string) {
	if len(ss) == 0 {
		return
	}
	e.buf = append(e.buf, open...)
	for i, s := range ss {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = appendString(e.buf, s)
	}
	e.buf = append(e.buf, ']')
}
