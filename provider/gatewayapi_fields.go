package provider

import (
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// What the provider does with each field of the Gateway API specs it
// writes (HTTPRoute and Gateway of GatewayAPIVersion). Every field is in
// one of the tables below, directly or under a rejected or not applicable
// parent: TestGatewayAPIFieldsCovered walks the Go types with reflection and
// fails on a field that is not, so a field a new Gateway API version adds
// cannot be dropped silently. The tables are also the decision tables of
// the resource documentation (templates/resources/*.md.tmpl), which
// TestGatewayAPIFieldsDocumented checks.

// fieldSupport is what the provider does with a Gateway API field.
type fieldSupport string

const (
	// supported: an argument or block sets it.
	supported fieldSupport = "supported"
	// rejected: an argument or block declares it (so the documentation
	// lists it), and a configuration that sets it fails at validate and
	// plan with an error of its own, at its path.
	rejected fieldSupport = "rejected"
	// notApplicable: not something users write; the note says why.
	notApplicable fieldSupport = "not applicable"
)

// apiField is one Gateway API field and how the provider handles it.
type apiField struct {
	// Field is the field's JSON path under spec; [] marks list elements.
	Field string
	// Attr is the argument or block path in the resource, list blocks
	// without an index ("" when none).
	Attr    string
	Support fieldSupport
	// Note says how the field maps (supported), why it is rejected and
	// what to do instead (rejected), or why it does not apply.
	Note string
}

// httpRouteFields are the fields of HTTPRouteSpec.
var httpRouteFields = []apiField{
	{"parentRefs", "parent_ref", supported, "one block per parent; at least one"},
	{"parentRefs[].group", "parent_ref.group", supported, "only " + gatewayGroup + " (the default): other groups are rejected"},
	{"parentRefs[].kind", "parent_ref.kind", supported, "Gateway (the default) or ListenerSet (the route attaches to that ListenerSet's listeners); other kinds are rejected"},
	{"parentRefs[].namespace", "parent_ref.namespace", supported, ""},
	{"parentRefs[].name", "parent_ref.name", supported, ""},
	{"parentRefs[].sectionName", "parent_ref.section_name", supported, ""},
	{"parentRefs[].port", "parent_ref.port", supported, ""},
	{"useDefaultGateways", "use_default_gateways", rejected, "varnishgw Gateways are not default Gateways; name the Gateways in parent_ref blocks"},
	{"hostnames", "hostnames", supported, ""},
	{"rules", "rule", supported, "one block per rule"},
	{"rules[].name", "rule.name", supported, ""},
	{"rules[].matches", "rule.match", supported, "one block per match"},
	{"rules[].matches[].path", "rule.match.path", supported, ""},
	{"rules[].matches[].path.type", "rule.match.path.type", supported, "Exact, PathPrefix, RegularExpression"},
	{"rules[].matches[].path.value", "rule.match.path.value", supported, ""},
	{"rules[].matches[].headers", "rule.match.header", supported, "one block per header"},
	{"rules[].matches[].headers[].type", "rule.match.header.type", supported, "Exact, RegularExpression"},
	{"rules[].matches[].headers[].name", "rule.match.header.name", supported, ""},
	{"rules[].matches[].headers[].value", "rule.match.header.value", supported, ""},
	{"rules[].matches[].queryParams", "rule.match.query_param", supported, "one block per parameter"},
	{"rules[].matches[].queryParams[].type", "rule.match.query_param.type", supported, "Exact, RegularExpression"},
	{"rules[].matches[].queryParams[].name", "rule.match.query_param.name", supported, ""},
	{"rules[].matches[].queryParams[].value", "rule.match.query_param.value", supported, ""},
	{"rules[].matches[].method", "rule.match.method", supported, ""},
	{"rules[].filters", "rule.filter", supported, "one block per filter"},
	{"rules[].filters[].type", "rule.filter.type", supported, "RequestHeaderModifier, ResponseHeaderModifier, RequestRedirect, URLRewrite, RequestMirror, CORS; ExternalAuth and ExtensionRef are rejected"},
	{"rules[].filters[].requestHeaderModifier", "rule.filter.request_header_modifier", supported, ""},
	{"rules[].filters[].requestHeaderModifier.set", "rule.filter.request_header_modifier.set", supported, "one block per header"},
	{"rules[].filters[].requestHeaderModifier.set[].name", "rule.filter.request_header_modifier.set.name", supported, ""},
	{"rules[].filters[].requestHeaderModifier.set[].value", "rule.filter.request_header_modifier.set.value", supported, ""},
	{"rules[].filters[].requestHeaderModifier.add", "rule.filter.request_header_modifier.add", supported, "one block per header"},
	{"rules[].filters[].requestHeaderModifier.add[].name", "rule.filter.request_header_modifier.add.name", supported, ""},
	{"rules[].filters[].requestHeaderModifier.add[].value", "rule.filter.request_header_modifier.add.value", supported, ""},
	{"rules[].filters[].requestHeaderModifier.remove", "rule.filter.request_header_modifier.remove", supported, ""},
	{"rules[].filters[].responseHeaderModifier", "rule.filter.response_header_modifier", supported, ""},
	{"rules[].filters[].responseHeaderModifier.set", "rule.filter.response_header_modifier.set", supported, "one block per header"},
	{"rules[].filters[].responseHeaderModifier.set[].name", "rule.filter.response_header_modifier.set.name", supported, ""},
	{"rules[].filters[].responseHeaderModifier.set[].value", "rule.filter.response_header_modifier.set.value", supported, ""},
	{"rules[].filters[].responseHeaderModifier.add", "rule.filter.response_header_modifier.add", supported, "one block per header"},
	{"rules[].filters[].responseHeaderModifier.add[].name", "rule.filter.response_header_modifier.add.name", supported, ""},
	{"rules[].filters[].responseHeaderModifier.add[].value", "rule.filter.response_header_modifier.add.value", supported, ""},
	{"rules[].filters[].responseHeaderModifier.remove", "rule.filter.response_header_modifier.remove", supported, ""},
	{"rules[].filters[].requestMirror", "rule.filter.request_mirror", supported, ""},
	{"rules[].filters[].requestMirror.backendRef", "rule.filter.request_mirror.backend_ref", supported, ""},
	{"rules[].filters[].requestMirror.backendRef.group", "rule.filter.request_mirror.backend_ref.group", supported, "a kind other than Service gets no copies (ResolvedRefs False, InvalidKind)"},
	{"rules[].filters[].requestMirror.backendRef.kind", "rule.filter.request_mirror.backend_ref.kind", supported, "a kind other than Service gets no copies (ResolvedRefs False, InvalidKind)"},
	{"rules[].filters[].requestMirror.backendRef.name", "rule.filter.request_mirror.backend_ref.name", supported, ""},
	{"rules[].filters[].requestMirror.backendRef.namespace", "rule.filter.request_mirror.backend_ref.namespace", supported, ""},
	{"rules[].filters[].requestMirror.backendRef.port", "rule.filter.request_mirror.backend_ref.port", supported, ""},
	{"rules[].filters[].requestMirror.percent", "rule.filter.request_mirror.percent", supported, ""},
	{"rules[].filters[].requestMirror.fraction", "rule.filter.request_mirror.fraction", supported, "whole percentages only (1/4, not 1/3): varnishgw mirrors in steps of 1%"},
	{"rules[].filters[].requestMirror.fraction.numerator", "rule.filter.request_mirror.fraction.numerator", supported, ""},
	{"rules[].filters[].requestMirror.fraction.denominator", "rule.filter.request_mirror.fraction.denominator", supported, ""},
	{"rules[].filters[].requestRedirect", "rule.filter.request_redirect", supported, ""},
	{"rules[].filters[].requestRedirect.scheme", "rule.filter.request_redirect.scheme", supported, ""},
	{"rules[].filters[].requestRedirect.hostname", "rule.filter.request_redirect.hostname", supported, ""},
	{"rules[].filters[].requestRedirect.path", "rule.filter.request_redirect.path", supported, ""},
	{"rules[].filters[].requestRedirect.path.type", "rule.filter.request_redirect.path.type", supported, ""},
	{"rules[].filters[].requestRedirect.path.replaceFullPath", "rule.filter.request_redirect.path.replace_full_path", supported, ""},
	{"rules[].filters[].requestRedirect.path.replacePrefixMatch", "rule.filter.request_redirect.path.replace_prefix_match", supported, ""},
	{"rules[].filters[].requestRedirect.port", "rule.filter.request_redirect.port", supported, ""},
	{"rules[].filters[].requestRedirect.statusCode", "rule.filter.request_redirect.status_code", supported, ""},
	{"rules[].filters[].urlRewrite", "rule.filter.url_rewrite", supported, ""},
	{"rules[].filters[].urlRewrite.hostname", "rule.filter.url_rewrite.hostname", supported, ""},
	{"rules[].filters[].urlRewrite.path", "rule.filter.url_rewrite.path", supported, ""},
	{"rules[].filters[].urlRewrite.path.type", "rule.filter.url_rewrite.path.type", supported, ""},
	{"rules[].filters[].urlRewrite.path.replaceFullPath", "rule.filter.url_rewrite.path.replace_full_path", supported, ""},
	{"rules[].filters[].urlRewrite.path.replacePrefixMatch", "rule.filter.url_rewrite.path.replace_prefix_match", supported, ""},
	{"rules[].filters[].cors", "rule.filter.cors", supported, "preflights are answered by the gateway; on the rule, the gateway owns the Access-Control-* response headers"},
	{"rules[].filters[].cors.allowOrigins", "rule.filter.cors.allow_origins", supported, "\"*.\" in front of a host stands for one or more labels; the origin is echoed, never \"*\""},
	{"rules[].filters[].cors.allowCredentials", "rule.filter.cors.allow_credentials", supported, ""},
	{"rules[].filters[].cors.allowMethods", "rule.filter.cors.allow_methods", supported, "\"*\" echoes the requested method"},
	{"rules[].filters[].cors.allowHeaders", "rule.filter.cors.allow_headers", supported, "\"*\" echoes the requested headers"},
	{"rules[].filters[].cors.exposeHeaders", "rule.filter.cors.expose_headers", supported, "\"*\" only with allow_credentials false"},
	{"rules[].filters[].cors.maxAge", "rule.filter.cors.max_age", supported, ""},
	{"rules[].filters[].externalAuth", "rule.filter.external_auth", rejected, "authenticate requests in the backend"},
	{"rules[].filters[].extensionRef", "rule.filter.extension_ref", rejected, "varnishgw has no filter extensions; custom request handling goes in the gateway's or the class's vcl"},
	{"rules[].backendRefs", "rule.backend_ref", supported, "one block per backend"},
	{"rules[].backendRefs[].group", "rule.backend_ref.group", supported, "a kind other than Service gets no traffic: its share is answered with 500 (ResolvedRefs False, InvalidKind)"},
	{"rules[].backendRefs[].kind", "rule.backend_ref.kind", supported, "a kind other than Service gets no traffic: its share is answered with 500 (ResolvedRefs False, InvalidKind)"},
	{"rules[].backendRefs[].name", "rule.backend_ref.name", supported, ""},
	{"rules[].backendRefs[].namespace", "rule.backend_ref.namespace", supported, "another namespace needs a ReferenceGrant there"},
	{"rules[].backendRefs[].port", "rule.backend_ref.port", supported, "required for a Service"},
	{"rules[].backendRefs[].weight", "rule.backend_ref.weight", supported, ""},
	{"rules[].backendRefs[].filters", "rule.backend_ref.filter", supported, "applied only to the requests sent to this backend, after the rule's filters"},
	{"rules[].backendRefs[].filters[].type", "rule.backend_ref.filter.type", supported, "RequestHeaderModifier; the other types are rejected"},
	{"rules[].backendRefs[].filters[].requestHeaderModifier", "rule.backend_ref.filter.request_header_modifier", supported, ""},
	{"rules[].backendRefs[].filters[].requestHeaderModifier.set", "rule.backend_ref.filter.request_header_modifier.set", supported, "one block per header"},
	{"rules[].backendRefs[].filters[].requestHeaderModifier.set[].name", "rule.backend_ref.filter.request_header_modifier.set.name", supported, ""},
	{"rules[].backendRefs[].filters[].requestHeaderModifier.set[].value", "rule.backend_ref.filter.request_header_modifier.set.value", supported, ""},
	{"rules[].backendRefs[].filters[].requestHeaderModifier.add", "rule.backend_ref.filter.request_header_modifier.add", supported, "one block per header"},
	{"rules[].backendRefs[].filters[].requestHeaderModifier.add[].name", "rule.backend_ref.filter.request_header_modifier.add.name", supported, ""},
	{"rules[].backendRefs[].filters[].requestHeaderModifier.add[].value", "rule.backend_ref.filter.request_header_modifier.add.value", supported, ""},
	{"rules[].backendRefs[].filters[].requestHeaderModifier.remove", "rule.backend_ref.filter.request_header_modifier.remove", supported, ""},
	{"rules[].backendRefs[].filters[].responseHeaderModifier", "rule.backend_ref.filter.response_header_modifier", rejected, "move the filter to the rule, whose filters apply to all of its backends, or give the backend a rule of its own"},
	{"rules[].backendRefs[].filters[].requestRedirect", "rule.backend_ref.filter.request_redirect", rejected, "move the filter to the rule, whose filters apply to all of its backends, or give the backend a rule of its own"},
	{"rules[].backendRefs[].filters[].urlRewrite", "rule.backend_ref.filter.url_rewrite", rejected, "move the filter to the rule, whose filters apply to all of its backends, or give the backend a rule of its own"},
	{"rules[].backendRefs[].filters[].requestMirror", "rule.backend_ref.filter.request_mirror", rejected, "move the filter to the rule, whose filters apply to all of its backends, or give the backend a rule of its own"},
	{"rules[].backendRefs[].filters[].cors", "rule.backend_ref.filter.cors", rejected, "move the filter to the rule, whose filters apply to all of its backends, or give the backend a rule of its own"},
	{"rules[].backendRefs[].filters[].externalAuth", "rule.backend_ref.filter.external_auth", rejected, "authenticate requests in the backend"},
	{"rules[].backendRefs[].filters[].extensionRef", "rule.backend_ref.filter.extension_ref", rejected, "varnishgw has no filter extensions; custom request handling goes in the gateway's or the class's vcl"},
	{"rules[].timeouts", "rule.timeouts", supported, ""},
	{"rules[].timeouts.request", "rule.timeouts.request", supported, ""},
	{"rules[].timeouts.backendRequest", "rule.timeouts.backend_request", supported, ""},
	{"rules[].retry", "rule.retry", supported, "experimental channel only: the plan fails on a cluster whose HTTPRoute CRD lacks it"},
	{"rules[].retry.codes", "rule.retry.codes", supported, ""},
	{"rules[].retry.attempts", "rule.retry.attempts", supported, ""},
	{"rules[].retry.backoff", "rule.retry.backoff", supported, ""},
	{"rules[].sessionPersistence", "rule.session_persistence", supported, "experimental channel only: the cluster needs the experimental channel's HTTPRoute CRD"},
	{"rules[].sessionPersistence.sessionName", "rule.session_persistence.session_name", supported, "the cookie (or header) name; a name derived from the route and rule when unset"},
	{"rules[].sessionPersistence.absoluteTimeout", "rule.session_persistence.absolute_timeout", supported, "whole seconds"},
	{"rules[].sessionPersistence.type", "rule.session_persistence.type", supported, "Cookie (the default) or Header"},
	{"rules[].sessionPersistence.cookieConfig", "rule.session_persistence.cookie_config", supported, ""},
	{"rules[].sessionPersistence.cookieConfig.lifetimeType", "rule.session_persistence.cookie_config.lifetime_type", supported, "Session or Permanent (Max-Age, needs absolute_timeout)"},
}

// rejectUnsupportedRoute reports the fields of the route the provider
// rejects itself; the routing core rejects the others
// (routing.ValidateHTTPRoute).
func rejectUnsupportedRoute(m *httpRouteModel, diags *diag.Diagnostics) {
	if v := m.UseDefaultGateways; !v.IsNull() && !v.IsUnknown() {
		diags.AddAttributeError(path.Root("use_default_gateways"), "Remove use_default_gateways",
			fmt.Sprintf("use_default_gateways = %q is not supported yet: varnishgw Gateways are not default Gateways. "+
				"Remove the argument and name the Gateways in parent_ref blocks.", v.ValueString()))
	}
	for i, p := range m.ParentRefs {
		pp := path.Root("parent_ref").AtListIndex(i)
		if g := p.Group; !g.IsNull() && !g.IsUnknown() && g.ValueString() != gatewayGroup {
			diags.AddAttributeError(pp.AtName("group"), "Use a Gateway as parent",
				fmt.Sprintf("parent_ref[%d].group = %q is not supported yet: varnishgw routes attach to Gateways (group %s). "+
					"Remove group, or set it to %q.", i, g.ValueString(), gatewayGroup, gatewayGroup))
		}
		if k := p.Kind; !k.IsNull() && !k.IsUnknown() && k.ValueString() != gatewayKind && k.ValueString() != listenerSetKind {
			diags.AddAttributeError(pp.AtName("kind"), "Use a Gateway or ListenerSet as parent",
				fmt.Sprintf("parent_ref[%d].kind = %q is not supported yet: varnishgw routes attach to Gateways and ListenerSets, not to %ss. "+
					"Remove kind (a Gateway), or set it to %q or %q, and name the parent.", i, k.ValueString(), k.ValueString(), gatewayKind, listenerSetKind))
		}
	}
}

// gatewayFields are the fields of GatewaySpec.
var gatewayFields = []apiField{
	{"gatewayClassName", "gateway_class_name", supported, ""},
	{"listeners", "listener", supported, "one block per listener; at least one"},
	{"listeners[].name", "listener.name", supported, ""},
	{"listeners[].hostname", "listener.hostname", supported, ""},
	{"listeners[].port", "listener.port", supported, ""},
	{"listeners[].protocol", "listener.protocol", supported, "HTTP and HTTPS (TLS terminated in the gateway pod); TLS, TCP and UDP are rejected"},
	{"listeners[].tls", "listener.tls", supported, "required with HTTPS, not allowed with HTTP"},
	{"listeners[].tls.mode", "listener.tls.mode", supported, "Terminate (the default); Passthrough is rejected"},
	{"listeners[].tls.certificateRefs", "listener.tls.certificate_ref", supported, "one block per Secret of type kubernetes.io/tls, at least one; chosen by SNI, the first is the default. Only the references enter Terraform's state, never the keys"},
	{"listeners[].tls.certificateRefs[].group", "listener.tls.certificate_ref.group", supported, `"" (core) only`},
	{"listeners[].tls.certificateRefs[].kind", "listener.tls.certificate_ref.kind", supported, "Secret only"},
	{"listeners[].tls.certificateRefs[].name", "listener.tls.certificate_ref.name", supported, "a Secret missing at plan is a warning: the listener serves once it exists"},
	{"listeners[].tls.certificateRefs[].namespace", "listener.tls.certificate_ref.namespace", supported, "another namespace needs a ReferenceGrant there (from Gateway to Secret); without one, a warning at plan and ResolvedRefs False, RefNotPermitted"},
	{"listeners[].tls.options", "listener.tls.options", rejected, "varnishgw has no implementation-specific TLS options"},
	{"listeners[].allowedRoutes", "listener.allowed_routes", supported, "routes of the Gateway's namespace when absent"},
	{"listeners[].allowedRoutes.namespaces", "listener.allowed_routes", supported, "flattened into allowed_routes"},
	{"listeners[].allowedRoutes.namespaces.from", "listener.allowed_routes.namespaces", supported, "Same, All, Selector"},
	{"listeners[].allowedRoutes.namespaces.selector", "listener.allowed_routes.selector", supported, "matchLabels in selector, matchExpressions in selector_expression blocks"},
	{"listeners[].allowedRoutes.kinds", "listener.allowed_routes.kind", supported, "HTTPRoute only; other kinds are rejected"},
	{"listeners[].allowedRoutes.kinds[].group", "listener.allowed_routes.kind.group", supported, ""},
	{"listeners[].allowedRoutes.kinds[].kind", "listener.allowed_routes.kind.kind", supported, ""},
	{"addresses", "address", rejected, "the gateway's addresses are those of its Service: use service_type (LoadBalancer) and service_annotations"},
	{"infrastructure", "infrastructure", supported, ""},
	{"infrastructure.labels", "infrastructure.labels", supported, ""},
	{"infrastructure.annotations", "infrastructure.annotations", supported, ""},
	{"infrastructure.parametersRef", "infrastructure.parameters_ref", supported, "a ConfigMap in the gateway's namespace"},
	{"infrastructure.parametersRef.group", "infrastructure.parameters_ref.group", supported, `"" only`},
	{"infrastructure.parametersRef.kind", "infrastructure.parameters_ref.kind", supported, "ConfigMap only"},
	{"infrastructure.parametersRef.name", "infrastructure.parameters_ref.name", supported, ""},
	{"allowedListeners", "allowed_listeners", supported, "which namespaces' ListenerSets (varnishgw_listener_set) may add listeners; none when absent"},
	{"allowedListeners.namespaces", "allowed_listeners", supported, "flattened into allowed_listeners"},
	{"allowedListeners.namespaces.from", "allowed_listeners.namespaces", supported, "None, Same, All, Selector"},
	{"allowedListeners.namespaces.selector", "allowed_listeners.selector", supported, "matchLabels only; matchExpressions are rejected"},
	{"tls", "tls", rejected, "TLS to backends (Varnish Cache has none; BackendTLSPolicy is not served either) and client certificate validation are not supported; HTTPS listeners take their certificates from listener.tls"},
	{"defaultScope", "default_scope", rejected, "a varnishgw Gateway is not a default Gateway; routes name it in their parent_ref blocks"},
}

// rejectUnsupportedGateway reports the fields of the gateway the provider
// does not support yet; config is the configuration m was read from.
func rejectUnsupportedGateway(m *gatewayModel, config tftypes.Value, diags *diag.Diagnostics) {
	if !m.SpecAddresses.IsNull() && !m.SpecAddresses.IsUnknown() && len(m.SpecAddresses.Elements()) > 0 {
		diags.AddAttributeError(firstArgument(config, path.Root("address")), "Remove the address blocks",
			"address is not supported yet: the gateway's addresses are those of its Service, which the computed addresses "+
				"attribute shows. Remove the address blocks; for a load balancer address set service_type = \"LoadBalancer\", "+
				"and choose the address with your cloud's service_annotations.")
	}
	if !m.TLS.IsNull() && !m.TLS.IsUnknown() {
		diags.AddAttributeError(firstArgument(config, path.Root("tls")), "Remove the tls block",
			"tls is not supported yet: the gateway's TLS settings are TLS to backends, which Varnish Cache does not have "+
				"(BackendTLSPolicy is not served either), and client certificate validation, which varnishgw does not do. "+
				"Remove the block: backends are reached over plain HTTP; an HTTPS listener's certificates go in the listener's tls block.")
	}
	if v := m.DefaultScope; !v.IsNull() && !v.IsUnknown() {
		diags.AddAttributeError(path.Root("default_scope"), "Remove default_scope",
			fmt.Sprintf("default_scope = %q is not supported yet: a varnishgw Gateway is not a default Gateway. Remove the "+
				"argument, and name the Gateway in the routes' parent_ref blocks.", v.ValueString()))
	}
}
