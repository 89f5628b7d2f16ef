// Package invalidation applies a Gateway's CacheInvalidations in one
// gateway pod and serves the authenticated invalidation endpoint.
//
// The Applier watches the CacheInvalidations of its Gateway, turns each
// into varnishd bans (Bans) once per pod, by UID, and acknowledges it in
// the pod's GatewayPodReport (status.invalidations, written with its own
// server-side apply field manager). An invalidation created before the
// varnishd cache child started has nothing to remove from that child's
// cache: it is acknowledged as skipped, without a ban.
//
// Every ban tests obj.* only (the X-Ghost-* object headers ghost stamps
// on cacheable objects), so varnishd's ban lurker evaluates it in the
// background and bans do not pile up.
//
// The Endpoint (POST /invalidate) lets a caller authenticated with a
// Kubernetes token, and allowed to create CacheInvalidations in the
// Gateway's namespace, create one and wait until every Ready pod has
// acknowledged it.
package invalidation

import (
	"regexp"
	"strings"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// The object headers ghost stamps on cacheable objects (the contract of
// issue #15, docs/guides/caching.md).
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
