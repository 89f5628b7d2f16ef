package routing

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func ptr[T any](v T) *T { return &v }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func listener(name string, port int32, host string) gatewayv1.Listener {
	l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.HTTPProtocolType}
	if host != "" {
		l.Hostname = ptr(gatewayv1.Hostname(host))
	}
	return l
}

func fromNS(l gatewayv1.Listener, from gatewayv1.FromNamespaces, sel *metav1.LabelSelector) gatewayv1.Listener {
	l.AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &from, Selector: sel}}
	return l
}

func gateway(listeners ...gatewayv1.Listener) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: "varnishgw", Listeners: listeners},
	}
}

type routeOpt func(*gatewayv1.HTTPRoute)

func route(ns, name string, opts ...routeOpt) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0)},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw", Namespace: ptr(gatewayv1.Namespace("infra"))}}},
			Rules: []gatewayv1.HTTPRouteRule{{
				BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "web", Port: ptr(gatewayv1.PortNumber(80))}}}},
			}},
		},
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

func hostnames(h ...string) routeOpt {
	return func(r *gatewayv1.HTTPRoute) {
		for _, v := range h {
			r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(v))
		}
	}
}

func created(d time.Duration) routeOpt {
	return func(r *gatewayv1.HTTPRoute) { r.CreationTimestamp = metav1.NewTime(t0.Add(d)) }
}

func section(name string) routeOpt {
	return func(r *gatewayv1.HTTPRoute) { r.Spec.ParentRefs[0].SectionName = ptr(gatewayv1.SectionName(name)) }
}

func rules(rs ...gatewayv1.HTTPRouteRule) routeOpt {
	return func(r *gatewayv1.HTTPRoute) { r.Spec.Rules = rs }
}

func backend(ns, name string, port int32, weight *int32) gatewayv1.HTTPBackendRef {
	b := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name), Port: ptr(port)}, Weight: weight}}
	if ns != "" {
		b.Namespace = ptr(gatewayv1.Namespace(ns))
	}
	return b
}

func prefix(v string) gatewayv1.HTTPRouteMatch {
	return gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchPathPrefix), Value: ptr(v)}}
}

func exact(v string) gatewayv1.HTTPRouteMatch {
	return gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchExact), Value: ptr(v)}}
}

func service(ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	if len(ports) == 0 {
		ports = []corev1.ServicePort{{Port: 80}}
	}
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Ports: ports}}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func slice(ns, svc, name string, typ discoveryv1.AddressType, portName string, port int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: typ,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr(portName), Port: ptr(port)}},
		Endpoints:   eps,
	}
}

func ep(ready *bool, addrs ...string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
}

func grant(ns, fromNS, to string) *gatewayv1.ReferenceGrant {
	g := &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(fromNS)}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		},
	}
	if to != "" {
		g.Spec.To[0].Name = ptr(gatewayv1.ObjectName(to))
	}
	return g
}

// condition returns the reason of condition typ of the fragment's first
// parent, prefixed with "!" when its status is False.
func condition(f *Fragment, typ gatewayv1.RouteConditionType) string {
	for _, c := range f.Parents[0].Conditions {
		if c.Type == string(typ) {
			if c.Status == string(metav1.ConditionFalse) {
				return "!" + c.Reason
			}
			return c.Reason
		}
	}
	return "missing"
}
