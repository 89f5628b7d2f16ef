package routing

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

const maxListeners = 64

// ValidateGateway checks the listener part of a Gateway spec that routing
// depends on: unique valid listener names, ports, HTTP or HTTPS protocols
// (varnishgw serves nothing else), hostnames, no two listeners with the
// same port and hostname, no HTTP and HTTPS on one port (they would share a
// socket), allowed route kinds (HTTPRoute only) and namespace selectors.
// TLS settings are not checked here.
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
					fmt.Sprintf("another listener uses %s on port %d: one port (socket %s) serves one protocol", prev, l.Port, SocketName(l.Port))))
			}
			protocols[l.Port] = l.Protocol
		default:
			errs = append(errs, field.NotSupported(p.Child("protocol"), l.Protocol, []string{string(gatewayv1.HTTPProtocolType), string(gatewayv1.HTTPSProtocolType)}))
		}
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
