package routing

import (
	"fmt"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// EscapedSlashesAnnotation is the Gateway annotation that says what a
// request path's escaped "/" or "\" (%2F, %5C) does, written by the
// provider from the gateway's escaped_slashes: EscapedSlashesReject (the
// default, also when absent) or EscapedSlashesKeep. ghost normalises every
// path before matching either way (ghost/README.md, "Routing semantics").
const EscapedSlashesAnnotation = "varnishgw.dev/escaped-slashes"

// The values of EscapedSlashesAnnotation (ghost.json escapedSlashes).
const (
	// EscapedSlashesReject answers a path with %2F or %5C with 400.
	EscapedSlashesReject = "reject"
	// EscapedSlashesKeep keeps them escaped: never a path separator.
	EscapedSlashesKeep = "keep"
)

// GatewayEscapedSlashes returns the Gateway's EscapedSlashesAnnotation,
// EscapedSlashesReject when it has none; any other value is an error naming
// the annotation, so that the routing served so far stays.
func GatewayEscapedSlashes(gw *gatewayv1.Gateway) (string, error) {
	if gw == nil {
		return EscapedSlashesReject, nil
	}
	v, ok := gw.Annotations[EscapedSlashesAnnotation]
	switch {
	case !ok || v == EscapedSlashesReject:
		return EscapedSlashesReject, nil
	case v == EscapedSlashesKeep:
		return v, nil
	}
	return "", fmt.Errorf("the annotation %s of Gateway %s/%s is %q: want %q or %q; fix the gateway's escaped_slashes and apply it again",
		EscapedSlashesAnnotation, gw.Namespace, gw.Name, v, EscapedSlashesReject, EscapedSlashesKeep)
}
