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
		out = append(out, []string{hostHeader, "==", b.Host, "&&", pathHeader, "~", re})
	}
	for _, t := range spec.Tags {
		out = append(out, []string{tagsHeader, "~", " " + regexp.QuoteMeta(t) + " "})
	}
	return out
}
