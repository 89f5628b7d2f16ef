// Package conformance names the Gateway API features varnishgw claims: the
// features whose every scenario of the public conformance suite passes when
// the suite's HTTPRoute scenarios are replayed through a real chaperone,
// varnishd and ghost (TestConformanceReplay in e2e/conformance, which also
// writes the conformance guide). The provider writes this list into each
// GatewayClass's status.supportedFeatures.
//
// A feature is added here when its scenarios pass in the replay; the replay
// fails while this list and the features it can claim differ.
package conformance

import (
	"slices"

	"sigs.k8s.io/gateway-api/pkg/features"
)

// supported is the list of claimed features, sorted by name.
var supported = []features.FeatureName{
	features.SupportGateway,
	features.SupportGatewayHTTPSListenerDetectMisdirectedRequests,
	features.SupportGatewayPort8080,
	features.SupportHTTPRoute,
	features.SupportHTTPRoute303RedirectStatusCode,
	features.SupportHTTPRoute307RedirectStatusCode,
	features.SupportHTTPRoute308RedirectStatusCode,
	features.SupportHTTPRouteBackendProtocolWebSocket,
	features.SupportHTTPRouteBackendRequestHeaderModification,
	features.SupportHTTPRouteBackendTimeout,
	features.SupportHTTPRouteCORS,
	features.SupportHTTPRouteHostRewrite,
	features.SupportHTTPRouteMethodMatching,
	features.SupportHTTPRouteNamedRouteRule,
	features.SupportHTTPRouteParentRefPort,
	features.SupportHTTPRoutePathRedirect,
	features.SupportHTTPRoutePathRewrite,
	features.SupportHTTPRoutePortRedirect,
	features.SupportHTTPRouteQueryParamMatching,
	features.SupportHTTPRouteRequestMirror,
	features.SupportHTTPRouteRequestMultipleMirrors,
	features.SupportHTTPRouteRequestPercentageMirror,
	features.SupportHTTPRouteRequestTimeout,
	features.SupportHTTPRouteResponseHeaderModification,
	features.SupportHTTPRouteRetry,
	features.SupportHTTPRouteSchemeRedirect,
	features.SupportReferenceGrant,
}

// SupportedFeatures returns the claimed features, sorted by name (the order
// status.supportedFeatures requires); the caller may modify the slice.
func SupportedFeatures() []features.FeatureName {
	return slices.Clone(supported)
}
