package invalidation

import (
	"regexp"
	"strings"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// The object headers ghost stamps on cacheable objects
// (docs/guides/caching.md).
const (
	hostHeader = "obj.http.X-Ghost-Host"
	pathHeader = "obj.http.X-Ghost-Path"
	urlHeader  = "obj.http.X-Ghost-Url"
	tagsHeader = "obj.http.X-Ghost-Tags"
)

// Bans returns the arguments of the varnishd `ban` CLI command for each
// entry of spec, in order: purges, bans, tags. Each argument is one CLI
// word (varnishadm.Conn.Do quotes and escapes it); prefixes and tags are
// regex-quoted. spec must be valid (vgwapi.ValidateInvalidation).
//
// varnishd loses the spaces of a ban argument at its ends (measured on 7.1
// and 7.7: " t1 " became t1), and a regex argument with a space inside was
// refused, so every space of a regular expression is written \x20, which
// PCRE2 reads as the same character. ghost stamps X-Ghost-Tags as the tags
// between single spaces, and obj.http reads a header without its leading
// space: a tag is matched as a whole word, (^|\x20)tag(\x20|$), so the
// tag product-4 never matches product-42.
func Bans(spec *vgwapi.InvalidationSpec) [][]string {
	out := make([][]string, 0, len(spec.Purges)+len(spec.Bans)+len(spec.Tags))
	for _, p := range spec.Purges {
		if p.Query == nil {
			out = append(out, []string{hostHeader, "==", p.Host, "&&", pathHeader, "==", p.Path})
			continue
		}
		url := p.Path
		if *p.Query != "" {
			url += "?" + *p.Query
		}
		out = append(out, []string{hostHeader, "==", p.Host, "&&", urlHeader, "==", url})
	}
	for _, b := range spec.Bans {
		re := b.PathRegex
		if b.PathPrefix != "" {
			re = "^" + regexp.QuoteMeta(b.PathPrefix)
		}
		out = append(out, []string{hostHeader, "==", b.Host, "&&", pathHeader, "~", banRegex(re)})
	}
	for _, t := range spec.Tags {
		out = append(out, []string{tagsHeader, "~", `(^|\x20)` + banRegex(regexp.QuoteMeta(t)) + `(\x20|$)`})
	}
	return out
}

// banRegex writes each space of the regular expression re as \x20 (see
// Bans).
func banRegex(re string) string {
	return strings.ReplaceAll(re, " ", `\x20`)
}
