package routing

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
)

const maxListeners = 64

// ValidateGateway checks the listener part of a Gateway spec that routing
// depends on: unique valid listener names, ports, HTTP or HTTPS protocols
// (varnishgw serves nothing else), hostnames, no two listeners with the
// same port and hostname, no HTTP and HTTPS on one port (they would share a
// socket), allowed route kinds (HTTPRoute only) and namespace selectors,
// and the listeners' TLS settings (ValidateListenerTLS).
func ValidateGateway(gw *gatewayv1.Gateway) field.ErrorList {
	if gw == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "nil Gateway")}
	}
	var errs field.ErrorList
	lp := field.NewPath("spec", "listeners")
	if len(gw.Spec.Listeners) == 0 {
		errs = append(errs, field.Required(lp, "at least one listener"))
	}
	if len(gw.Spec.Listeners) > maxListeners {
		errs = append(errs, field.TooMany(lp, len(gw.Spec.Listeners), maxListeners))
	}
	names := map[gatewayv1.SectionName]bool{}
	type portHost struct {
		port int32
		host string
	}
	hosts := map[portHost]string{}
	protocols := map[int32]gatewayv1.ProtocolType{}
	for i := range gw.Spec.Listeners {
		l := &gw.Spec.Listeners[i]
		p := lp.Index(i)
		if msg := objectNameProblem(string(l.Name), true, "listener names"); msg != "" {
			errs = append(errs, field.Invalid(p.Child("name"), l.Name, msg))
		}
		if names[l.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), l.Name))
		}
		names[l.Name] = true
		if l.Port < 1 || l.Port > 65535 {
			errs = append(errs, field.Invalid(p.Child("port"), l.Port, "must be a port number from 1 to 65535"))
		}
		switch l.Protocol {
		case gatewayv1.HTTPProtocolType, gatewayv1.HTTPSProtocolType:
			if prev, ok := protocols[l.Port]; ok && prev != l.Protocol {
				errs = append(errs, field.Invalid(p.Child("protocol"), l.Protocol,
					fmt.Sprintf("another listener uses %s on port %d: one port (socket %s) serves one protocol", prev, l.Port, ghostjson.SocketName(l.Port))))
			}
			protocols[l.Port] = l.Protocol
		default:
			errs = append(errs, field.NotSupported(p.Child("protocol"), l.Protocol, []string{string(gatewayv1.HTTPProtocolType), string(gatewayv1.HTTPSProtocolType)}))
		}
		errs = append(errs, ValidateListenerTLS(p, l)...)
		host := anyHost
		if l.Hostname != nil && *l.Hostname != "" {
			host = string(*l.Hostname)
			if h := strings.ToLower(host); h != host {
				errs = append(errs, field.Invalid(p.Child("hostname"), host, "must be lower case: "+h))
			} else {
				errs = append(errs, validateHostname(p.Child("hostname"), host, true)...)
			}
		}
		if prev, ok := hosts[portHost{l.Port, host}]; ok {
			errs = append(errs, field.Invalid(p.Child("hostname"), host,
				fmt.Sprintf("listener %s already serves this hostname on port %d: give one of them another hostname or port", prev, l.Port)))
		} else {
			hosts[portHost{l.Port, host}] = string(l.Name)
		}
		if ar := l.AllowedRoutes; ar != nil {
			for j, k := range ar.Kinds {
				if (k.Group != nil && *k.Group != gatewayv1.GroupName) || k.Kind != "HTTPRoute" {
					errs = append(errs, field.NotSupported(p.Child("allowedRoutes", "kinds").Index(j), k.Kind, []string{"HTTPRoute"}))
				}
			}
			if ns := ar.Namespaces; ns != nil && ns.From != nil && *ns.From == gatewayv1.NamespacesFromSelector {
				sp := p.Child("allowedRoutes", "namespaces", "selector")
				if ns.Selector == nil {
					errs = append(errs, field.Required(sp, "from: Selector needs a selector"))
				} else if _, err := metav1.LabelSelectorAsSelector(ns.Selector); err != nil {
					errs = append(errs, field.Invalid(sp, ns.Selector.String(), err.Error()))
				}
			}
		}
	}
	return errs
}

// maxCertificateRefs is the Gateway API's limit of certificateRefs per
// listener.
const maxCertificateRefs = 64

// ValidateListenerTLS checks the tls of listener l at path p, as varnishgw
// serves it: an HTTPS listener terminates TLS (mode Terminate, the
// default) with one or more certificates, each a core Secret (group "",
// kind Secret) named by a valid name, in the Gateway's namespace or in
// another one (which then needs a ReferenceGrant: that is a condition of
// the listener, not an error of the spec); an HTTP listener has no tls.
// Passthrough, options and references to other kinds are rejected. The
// provider checks configurations with it, and the chaperone the Gateways
// it serves.
func ValidateListenerTLS(p *field.Path, l *gatewayv1.Listener) field.ErrorList {
	var errs field.ErrorList
	tp := p.Child("tls")
	switch l.Protocol {
	case gatewayv1.HTTPSProtocolType:
		if l.TLS == nil {
			return append(errs, field.Required(tp, "an HTTPS listener needs tls with a certificateRef: a Secret of type kubernetes.io/tls"))
		}
	case gatewayv1.HTTPProtocolType:
		if l.TLS != nil {
			errs = append(errs, field.Forbidden(tp, "an HTTP listener has no TLS: remove tls, or set protocol HTTPS"))
		}
		return errs
	default:
		return nil // the protocol's own error says it
	}
	if m := l.TLS.Mode; m != nil && *m != gatewayv1.TLSModeTerminate {
		msg := "varnishgw terminates TLS on HTTPS listeners: set mode Terminate (the default) or remove mode"
		if *m == gatewayv1.TLSModePassthrough {
			msg = "Passthrough hands the encrypted connection to a backend (protocol TLS with TLSRoutes), which varnishgw does not serve; " + msg
		}
		errs = append(errs, field.NotSupported(tp.Child("mode"), *m, []string{string(gatewayv1.TLSModeTerminate)}))
		errs[len(errs)-1].Detail = msg
	}
	if len(l.TLS.Options) > 0 {
		keys := make([]string, 0, len(l.TLS.Options))
		for k := range l.TLS.Options {
			keys = append(keys, string(k))
		}
		slices.Sort(keys)
		errs = append(errs, field.Forbidden(tp.Child("options"),
			fmt.Sprintf("varnishgw has no implementation-specific TLS options (got %s): remove options", strings.Join(keys, ", "))))
	}
	cp := tp.Child("certificateRefs")
	switch n := len(l.TLS.CertificateRefs); {
	case n == 0:
		errs = append(errs, field.Required(cp, "at least one Secret of type kubernetes.io/tls with the listener's certificate and key"))
	case n > maxCertificateRefs:
		errs = append(errs, field.TooMany(cp, n, maxCertificateRefs))
	}
	for i, r := range l.TLS.CertificateRefs {
		rp := cp.Index(i)
		if r.Group != nil && *r.Group != "" {
			errs = append(errs, field.NotSupported(rp.Child("group"), *r.Group, []string{`"" (core)`}))
			errs[len(errs)-1].Detail = fmt.Sprintf("certificates come from core Secrets: remove group %q", *r.Group)
		}
		if r.Kind != nil && *r.Kind != "Secret" {
			errs = append(errs, field.NotSupported(rp.Child("kind"), *r.Kind, []string{"Secret"}))
			errs[len(errs)-1].Detail = fmt.Sprintf("certificates come from Secrets of type kubernetes.io/tls: set kind Secret or remove kind %q", *r.Kind)
		}
		if msg := objectNameProblem(string(r.Name), false, "Secret names"); msg != "" {
			errs = append(errs, field.Invalid(rp.Child("name"), r.Name, msg))
		}
		if r.Namespace != nil && *r.Namespace != "" {
			if msg := objectNameProblem(string(*r.Namespace), true, "namespace names"); msg != "" {
				errs = append(errs, field.Invalid(rp.Child("namespace"), *r.Namespace, msg))
			}
		}
	}
	return errs
}

// CertificateSecrets are the Secrets the HTTPS listeners of gw name in
// their certificateRefs, each once, sorted by namespace and name; a ref
// without a namespace is in gw's. References to other kinds than core
// Secrets are left out (ValidateListenerTLS rejects them).
func CertificateSecrets(gw *gatewayv1.Gateway) []object.Ref {
	var out []object.Ref
	for i := range gw.Spec.Listeners {
		l := &gw.Spec.Listeners[i]
		if l.Protocol != gatewayv1.HTTPSProtocolType || l.TLS == nil {
			continue
		}
		for _, r := range l.TLS.CertificateRefs {
			if (r.Group != nil && *r.Group != "") || (r.Kind != nil && *r.Kind != "Secret") {
				continue
			}
			ref := object.Ref{Namespace: gw.Namespace, Name: string(r.Name)}
			if r.Namespace != nil && *r.Namespace != "" {
				ref.Namespace = string(*r.Namespace)
			}
			if !slices.Contains(out, ref) {
				out = append(out, ref)
			}
		}
	}
	slices.SortFunc(out, func(a, b object.Ref) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// CertificateRefPermitted reports whether a Gateway in gwNS may use the
// Secret secretNS/name as a listener certificate: always in its own
// namespace, otherwise only when a ReferenceGrant in secretNS lets
// Gateways of gwNS reference that Secret (or every Secret there). Without
// one the listener's ResolvedRefs is False with reason RefNotPermitted.
func CertificateRefPermitted(grants []*gatewayv1.ReferenceGrant, gwNS, secretNS, name string) bool {
	return certificateRefPermitted(grants, "Gateway", gwNS, secretNS, name)
}

// ListenerCertificateRefPermitted is CertificateRefPermitted for the
// listener named listener among the (composed) listeners of gw: a
// listener of a ListenerSet (a ListenerSetListenerKey) references
// Secrets as its ListenerSet, so a Secret outside the ListenerSet's
// namespace needs a ReferenceGrant from kind ListenerSet of that
// namespace (GEP-1713); a ReferenceGrant from Gateways does not do.
func ListenerCertificateRefPermitted(grants []*gatewayv1.ReferenceGrant, gw *gatewayv1.Gateway, listener, secretNS, name string) bool {
	if set, _, ok := parseListenerKey(listener); ok {
		return certificateRefPermitted(grants, "ListenerSet", set.Namespace, secretNS, name)
	}
	return certificateRefPermitted(grants, "Gateway", gw.Namespace, secretNS, name)
}

// certificateRefPermitted reports whether an object of kind fromKind (of
// the Gateway API group) in fromNS may reference the Secret
// secretNS/name.
func certificateRefPermitted(grants []*gatewayv1.ReferenceGrant, fromKind gatewayv1.Kind, fromNS, secretNS, name string) bool {
	if fromNS == secretNS {
		return true
	}
	for _, g := range grants {
		if g == nil || g.Namespace != secretNS {
			continue
		}
		if !slices.ContainsFunc(g.Spec.From, func(f gatewayv1.ReferenceGrantFrom) bool {
			return f.Group == gatewayv1.GroupName && f.Kind == fromKind && string(f.Namespace) == fromNS
		}) {
			continue
		}
		if slices.ContainsFunc(g.Spec.To, func(t gatewayv1.ReferenceGrantTo) bool {
			return (t.Group == "" || t.Group == "core") && t.Kind == "Secret" && (t.Name == nil || *t.Name == "" || string(*t.Name) == name)
		}) {
			return true
		}
	}
	return false
}
