package routing

import (
	"strings"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestValidateHTTPRoute(t *testing.T) {
	redirect := gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{StatusCode: ptr(301)}}
	rewrite := gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Hostname: ptr(gatewayv1.PreciseHostname("x.example.com"))}}
	headerMod := func(names ...string) gatewayv1.HTTPRouteFilter {
		f := gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{}}
		for _, n := range names {
			f.RequestHeaderModifier.Set = append(f.RequestHeaderModifier.Set, gatewayv1.HTTPHeader{Name: gatewayv1.HTTPHeaderName(n), Value: "v"})
		}
		return f
	}
	cors := func(c *gatewayv1.HTTPCORSFilter) gatewayv1.HTTPRouteFilter {
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterCORS, CORS: c}
	}
	tests := []struct {
		name    string
		mutate  func(r *gatewayv1.HTTPRoute)
		wantErr string // substring of the aggregate error; "" means valid
	}{
		{"valid", func(*gatewayv1.HTTPRoute) {}, ""},
		{"wildcard hostname", func(r *gatewayv1.HTTPRoute) { r.Spec.Hostnames = []gatewayv1.Hostname{"*.example.com"} }, ""},
		{"bad hostname", func(r *gatewayv1.HTTPRoute) { r.Spec.Hostnames = []gatewayv1.Hostname{"Foo_.example.com"} }, `spec.hostnames[0]: Invalid value: "Foo_.example.com": must be lower case, and has an underscore in "foo_": hostnames have lower-case letters, digits, '-' and '.'; use '-'`},
		{"upper-case hostname", func(r *gatewayv1.HTTPRoute) { r.Spec.Hostnames = []gatewayv1.Hostname{"Shop.Example.com"} }, `spec.hostnames[0]: Invalid value: "Shop.Example.com": must be lower case: use "shop.example.com"`},
		{"bad rule name", func(r *gatewayv1.HTTPRoute) { r.Spec.Rules[0].Name = ptr(gatewayv1.SectionName("Bad_Name")) },
			`spec.rules[0].name: Invalid value: "Bad_Name": must be lower case, and has an underscore in "bad_name": rule names have lower-case letters, digits, '-' and '.'; use '-'`},
		{"unicode hostname", func(r *gatewayv1.HTTPRoute) { r.Spec.Hostnames = []gatewayv1.Hostname{"bücher.example"} }, `spec.hostnames[0]: Invalid value: "bücher.example": is a Unicode (internationalised) name: use its punycode (xn--...) form "xn--bcher-kva.example"`},
		{"ip hostname", func(r *gatewayv1.HTTPRoute) { r.Spec.Hostnames = []gatewayv1.Hostname{"10.0.0.1"} }, "not an IP address"},
		{"relative path", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{prefix("/ok"), exact("foo")}
		}, `spec.rules[0].matches[1].path.value: Invalid value: "foo"`},
		{"double slash", func(r *gatewayv1.HTTPRoute) { r.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{prefix("/a//b")} }, `must not contain "//"`},
		{"bad regex", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchRegularExpression), Value: ptr(`(?=x)`)}}}
		}, "spec.rules[0].matches[0].path.value"},
		{"bad header name", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{{Headers: []gatewayv1.HTTPHeaderMatch{{Name: "bad header", Value: "x"}}}}
		}, "spec.rules[0].matches[0].headers[0].name"},
		{"token header name", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{{Headers: []gatewayv1.HTTPHeaderMatch{{Name: "X_Custom.v1~", Value: "x"}}}}
		}, ""},
		{"bad query name", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{{QueryParams: []gatewayv1.HTTPQueryParamMatch{{Name: "a=b", Value: "x"}}}}
		}, "spec.rules[0].matches[0].queryParams[0].name"},
		{"duplicate header match", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{{Headers: []gatewayv1.HTTPHeaderMatch{{Name: "X-A", Value: "x"}, {Name: "x-a", Value: "y"}}}}
		}, "spec.rules[0].matches[0].headers[1].name: Duplicate"},
		{"header regex", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{{Headers: []gatewayv1.HTTPHeaderMatch{{Type: ptr(gatewayv1.HeaderMatchRegularExpression), Name: "X-A", Value: `a\1`}}}}
		}, "spec.rules[0].matches[0].headers[0].value"},
		{"header value CRLF", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{{Headers: []gatewayv1.HTTPHeaderMatch{{Name: "X-A", Value: "a\r\nb"}}}}
		}, "must not contain CR"},
		{"bad method", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{{Method: ptr(gatewayv1.HTTPMethod("BREW"))}}
		}, "spec.rules[0].matches[0].method: Unsupported value"},
		{"weight too big", func(r *gatewayv1.HTTPRoute) { r.Spec.Rules[0].BackendRefs[0].Weight = ptr(int32(1000001)) }, "spec.rules[0].backendRefs[0].weight"},
		{"negative weight", func(r *gatewayv1.HTTPRoute) { r.Spec.Rules[0].BackendRefs[0].Weight = ptr(int32(-1)) }, "spec.rules[0].backendRefs[0].weight"},
		{"backend without name", func(r *gatewayv1.HTTPRoute) { r.Spec.Rules[0].BackendRefs[0].Name = "" }, "spec.rules[0].backendRefs[0].name: Required"},
		{"backend bad namespace", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].BackendRefs[0].Namespace = ptr(gatewayv1.Namespace("Bad_NS"))
		}, "spec.rules[0].backendRefs[0].namespace"},
		{"service without port", func(r *gatewayv1.HTTPRoute) { r.Spec.Rules[0].BackendRefs[0].Port = nil }, "spec.rules[0].backendRefs[0].port: Required"},
		{"backendRef request header filter", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].BackendRefs[0].Filters = []gatewayv1.HTTPRouteFilter{headerMod("X-A")}
		}, ""},
		{"backendRef request header filter twice", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].BackendRefs[0].Filters = []gatewayv1.HTTPRouteFilter{headerMod("X-A"), headerMod("X-B")}
		}, `spec.rules[0].backendRefs[0].filters[1].type: Duplicate value: "RequestHeaderModifier"`},
		{"backendRef request header filter bad name", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].BackendRefs[0].Filters = []gatewayv1.HTTPRouteFilter{headerMod("bad name")}
		}, `spec.rules[0].backendRefs[0].filters[0].requestHeaderModifier.set[0].name: Invalid value: "bad name"`},
		{"backendRef rewrite filter", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].BackendRefs[0].Filters = []gatewayv1.HTTPRouteFilter{rewrite}
		}, `spec.rules[0].backendRefs[0].filters[0].type: Invalid value: "URLRewrite": not supported on a backendRef, which may have RequestHeaderModifier filters only: move this filter to the rule's filters`},
		{"backendRef response header filter", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].BackendRefs[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier,
				ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{Remove: []string{"Server"}}}}
		}, `spec.rules[0].backendRefs[0].filters[0].type: Invalid value: "ResponseHeaderModifier": not supported on a backendRef`},
		{"backendRef extension filter", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].BackendRefs[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterExtensionRef,
				ExtensionRef: &gatewayv1.LocalObjectReference{Group: "x.example", Kind: "F", Name: "f"}}}
		}, `spec.rules[0].backendRefs[0].filters[0].type: Invalid value: "ExtensionRef": ExtensionRef filters are not supported`},
		{"backendRef filter type without its field", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].BackendRefs[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier}}
		}, `spec.rules[0].backendRefs[0].filters[0].requestHeaderModifier: Required value`},
		{"redirect and rewrite", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].BackendRefs = nil
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{redirect, rewrite}
		}, "RequestRedirect or a URLRewrite filter, not both"},
		{"redirect with backends", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{redirect}
		}, "spec.rules[0].backendRefs: Invalid value"},
		{"redirect alone", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].BackendRefs = nil
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{redirect}
		}, ""},
		{"bad redirect status", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].BackendRefs = nil
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{StatusCode: ptr(304)}}}
		}, "spec.rules[0].filters[0].requestRedirect.statusCode: Unsupported value: 304"},
		{"bad redirect scheme", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].BackendRefs = nil
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Scheme: ptr("ftp")}}}
		}, "requestRedirect.scheme"},
		{"prefix rewrite with exact match", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{exact("/a")}
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{
				Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr("/b")}}}}
		}, "ReplacePrefixMatch needs PathPrefix matches"},
		{"path modifier mismatch", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{
				Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplacePrefixMatch: ptr("/b")}}}}
		}, "spec.rules[0].filters[0].urlRewrite.path"},
		{"duplicate header modifier", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{headerMod("X-A"), headerMod("X-B")}
		}, "spec.rules[0].filters[1].type: Duplicate"},
		{"header modifier duplicate name", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{headerMod("X-A", "x-a")}
		}, "requestHeaderModifier.set[1].name: Duplicate"},
		{"filter field missing", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier}}
		}, "spec.rules[0].filters[0].requestHeaderModifier: Required"},
		{"cors in another filter", func(r *gatewayv1.HTTPRoute) {
			f := headerMod("X-A")
			f.CORS = &gatewayv1.HTTPCORSFilter{}
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{f}
		}, `spec.rules[0].filters[0].cors: Forbidden: must not be set when type is RequestHeaderModifier`},
		{"cors without its field", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterCORS}}
		}, "spec.rules[0].filters[0].cors: Required value: must be set when type is CORS"},
		{"cors twice", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{cors(&gatewayv1.HTTPCORSFilter{}), cors(&gatewayv1.HTTPCORSFilter{})}
		}, `spec.rules[0].filters[1].type: Duplicate value: "CORS"`},
		{"externalAuth unsupported", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterExternalAuth, ExternalAuth: &gatewayv1.HTTPExternalAuthFilter{}}}
		}, `Invalid value: "ExternalAuth": ExternalAuth filters are not supported yet: authenticate requests in the backend; remove the filter`},
		{"extensionRef unsupported", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterExtensionRef, ExtensionRef: &gatewayv1.LocalObjectReference{Name: "x"}}}
		}, `Invalid value: "ExtensionRef": ExtensionRef filters are not supported: varnishgw has no filter extensions`},
		{"mirror fraction", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestMirror, RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{
				BackendRef: gatewayv1.BackendObjectReference{Name: "m", Port: ptr(int32(80))}, Fraction: &gatewayv1.Fraction{Numerator: 1, Denominator: ptr(int32(3))}}}}
		}, "whole percentage"},
		{"timeouts", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Timeouts = &gatewayv1.HTTPRouteTimeouts{Request: ptr(gatewayv1.Duration("10s")), BackendRequest: ptr(gatewayv1.Duration("1m"))}
		}, "spec.rules[0].timeouts.backendRequest: Invalid value: \"1m\": must not be longer than timeouts.request"},
		{"bad duration", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Timeouts = &gatewayv1.HTTPRouteTimeouts{Request: ptr(gatewayv1.Duration("1.5s"))}
		}, "spec.rules[0].timeouts.request"},
		{"too many rules", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules = make([]gatewayv1.HTTPRouteRule, 17)
		}, "spec.rules: Too many: 17: must have at most 16 items"},
		{"too many matches", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules = make([]gatewayv1.HTTPRouteRule, 3)
			for i := range r.Spec.Rules {
				r.Spec.Rules[i].Matches = make([]gatewayv1.HTTPRouteMatch, 50)
			}
		}, "spec.rules[*].matches: Too many: 150"},
		{"retry", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Retry = &gatewayv1.HTTPRouteRetry{Codes: []gatewayv1.HTTPRouteRetryStatusCode{500, 502, 503, 504, 429},
				Attempts: ptr(3), Backoff: ptr(gatewayv1.Duration("100ms"))}
		}, ""},
		{"retry without settings", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Retry = &gatewayv1.HTTPRouteRetry{}
		}, ""},
		{"retry attempts 0", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Retry = &gatewayv1.HTTPRouteRetry{Attempts: ptr(0)}
		}, "spec.rules[0].retry.attempts: Invalid value: 0: must be from 1 to 100 retries"},
		{"retry attempts 101", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Retry = &gatewayv1.HTTPRouteRetry{Attempts: ptr(101)}
		}, "spec.rules[0].retry.attempts: Invalid value: 101"},
		{"retry code 200", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Retry = &gatewayv1.HTTPRouteRetry{Codes: []gatewayv1.HTTPRouteRetryStatusCode{500, 200}}
		}, "spec.rules[0].retry.codes[1]: Invalid value: 200: must be an HTTP status from 400 to 599"},
		{"retry code twice", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Retry = &gatewayv1.HTTPRouteRetry{Codes: []gatewayv1.HTTPRouteRetryStatusCode{503, 503}}
		}, "spec.rules[0].retry.codes[1]: Duplicate value: 503"},
		{"retry bad backoff", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Retry = &gatewayv1.HTTPRouteRetry{Backoff: ptr(gatewayv1.Duration("0.5s"))}
		}, `spec.rules[0].retry.backoff: Invalid value: "0.5s": must be a Gateway API duration`},
		{"retry backoff too long", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Retry = &gatewayv1.HTTPRouteRetry{Backoff: ptr(gatewayv1.Duration("2h"))}
		}, `spec.rules[0].retry.backoff: Invalid value: "2h": must not be longer than 2s: a backoff holds one of the gateway's worker threads`},
		{"retry backoff just too long", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Retry = &gatewayv1.HTTPRouteRetry{Backoff: ptr(gatewayv1.Duration("2001ms"))}
		}, `spec.rules[0].retry.backoff: Invalid value: "2001ms": must not be longer than 2s`},
		{"retry with backendRef filters", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Retry = &gatewayv1.HTTPRouteRetry{Attempts: ptr(1)}
			r.Spec.Rules[0].BackendRefs = []gatewayv1.HTTPBackendRef{backend("", "web", 80, nil)}
			r.Spec.Rules[0].BackendRefs[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
				RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "X", Value: "1"}}}}}
		}, "spec.rules[0].retry: Forbidden: a rule with a retry policy cannot have backendRefs with filters of their own"},
		{"session persistence", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].SessionPersistence = &gatewayv1.SessionPersistence{SessionName: ptr("gw-session"), AbsoluteTimeout: ptr(gatewayv1.Duration("1h")),
				Type: ptr(gatewayv1.CookieBasedSessionPersistence), CookieConfig: &gatewayv1.CookieConfig{LifetimeType: ptr(gatewayv1.PermanentCookieLifetimeType)}}
		}, ""},
		{"session persistence defaults", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].SessionPersistence = &gatewayv1.SessionPersistence{}
		}, ""},
		{"session persistence by header", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].SessionPersistence = &gatewayv1.SessionPersistence{Type: ptr(gatewayv1.HeaderBasedSessionPersistence), SessionName: ptr("X-Session")}
		}, ""},
		{"session persistence of an unknown type", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].SessionPersistence = &gatewayv1.SessionPersistence{Type: ptr(gatewayv1.SessionPersistenceType("Query"))}
		}, `spec.rules[0].sessionPersistence.type: Unsupported value: "Query": supported values: "Cookie", "Header"`},
		{"session cookie config with header", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].SessionPersistence = &gatewayv1.SessionPersistence{Type: ptr(gatewayv1.HeaderBasedSessionPersistence), CookieConfig: &gatewayv1.CookieConfig{}}
		}, "spec.rules[0].sessionPersistence.cookieConfig: Forbidden: cookieConfig is for type Cookie only"},
		{"session name with a space", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].SessionPersistence = &gatewayv1.SessionPersistence{SessionName: ptr("my session")}
		}, `spec.rules[0].sessionPersistence.sessionName: Invalid value: "my session": must be a cookie or header name: letters, digits and`},
		{"session name empty", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].SessionPersistence = &gatewayv1.SessionPersistence{SessionName: ptr("")}
		}, `spec.rules[0].sessionPersistence.sessionName: Invalid value: "": must not be empty`},
		{"session name too long", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].SessionPersistence = &gatewayv1.SessionPersistence{SessionName: ptr(strings.Repeat("a", 129))}
		}, `spec.rules[0].sessionPersistence.sessionName: Too long`},
		{"session timeout not a duration", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].SessionPersistence = &gatewayv1.SessionPersistence{AbsoluteTimeout: ptr(gatewayv1.Duration("1 hour"))}
		}, `spec.rules[0].sessionPersistence.absoluteTimeout: Invalid value: "1 hour": must be a Gateway API duration`},
		{"session timeout below a second", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].SessionPersistence = &gatewayv1.SessionPersistence{AbsoluteTimeout: ptr(gatewayv1.Duration("1500ms"))}
		}, `spec.rules[0].sessionPersistence.absoluteTimeout: Invalid value: "1500ms": must be a whole number of seconds`},
		{"permanent session without timeout", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].SessionPersistence = &gatewayv1.SessionPersistence{CookieConfig: &gatewayv1.CookieConfig{LifetimeType: ptr(gatewayv1.PermanentCookieLifetimeType)}}
		}, "spec.rules[0].sessionPersistence.absoluteTimeout: Required value: lifetimeType Permanent needs an absoluteTimeout"},
		{"unknown lifetime type", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].SessionPersistence = &gatewayv1.SessionPersistence{CookieConfig: &gatewayv1.CookieConfig{LifetimeType: ptr(gatewayv1.CookieLifetimeType("Forever"))}}
		}, `spec.rules[0].sessionPersistence.cookieConfig.lifetimeType: Unsupported value: "Forever"`},
		{"session on a redirect", func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].BackendRefs = nil
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{redirect}
			r.Spec.Rules[0].SessionPersistence = &gatewayv1.SessionPersistence{}
		}, "spec.rules[0].sessionPersistence: Invalid value: \"sessionPersistence\": a rule with a RequestRedirect filter sends no request to a backend"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := route("infra", "r")
			tt.mutate(r)
			err := ValidateHTTPRoute(r).ToAggregate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
