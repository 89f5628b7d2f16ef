package control

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1apply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
)

// ServiceAddresses are the Service's addresses: the LoadBalancer ingress
// IPs and hostnames, or else its cluster IPs.
func ServiceAddresses(svc *corev1.Service) []gatewayv1.GatewayStatusAddress {
	var out []gatewayv1.GatewayStatusAddress
	ip, host := gatewayv1.IPAddressType, gatewayv1.HostnameAddressType
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			out = append(out, gatewayv1.GatewayStatusAddress{Type: &ip, Value: in.IP})
		} else if in.Hostname != "" {
			out = append(out, gatewayv1.GatewayStatusAddress{Type: &host, Value: in.Hostname})
		}
	}
	if len(out) > 0 {
		return out
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, a := range ips {
		if a != corev1.ClusterIPNone {
			out = append(out, gatewayv1.GatewayStatusAddress{Type: &ip, Value: a})
		}
	}
	return out
}

// AttachedRoutes counts the accepted routes per listener of gw from its
// RoutingFragments (the ones the gateway pods accept); every listener of gw
// has an entry.
func (c *Cluster) AttachedRoutes(ctx context.Context, gw *gatewayv1.Gateway) (map[string]int32, error) {
	frags, _, err := c.GatewayFragments(ctx, object.Ref{Namespace: gw.Namespace, Name: gw.Name})
	if err != nil {
		return nil, err
	}
	counts := routing.ListenerAttachedRoutes(frags)
	out := map[string]int32{}
	for _, l := range gw.Spec.Listeners {
		out[string(l.Name)] = counts[string(l.Name)]
	}
	return out, nil
}

// WriteGatewayStatus sets the provider's part of the Gateway status with
// field manager FieldManager: Accepted, the listeners (supported kinds,
// Accepted, and ResolvedRefs of the HTTP listeners: the gateway pods write
// an HTTPS listener's) and the addresses of svc (none when nil). With
// invalidParams the Gateway is not accepted (reason InvalidParameters, the
// error as message). The chaperone's Programmed condition (another field
// manager) is left alone.
//
// A listener's attachedRoutes is the gateway pods' (they follow every
// route change) once they write it: while a pod owns it
// (podsCountRoutes), the provider's apply repeats the value the entry has,
// so that it neither changes nor, by leaving out a field it owned,
// deletes it; before (a new listener, no pod running yet, pods of a
// release that did not count), it is the count of the listener's
// RoutingFragments now. Entries of listeners the Gateway no longer
// has are removed first, whoever wrote their fields. The apply carries the
// resource version it read, and is made again on a conflict.
func (c *Cluster) WriteGatewayStatus(ctx context.Context, gw *gatewayv1.Gateway, svc *corev1.Service, invalidParams error) error {
	ns, name := gw.Namespace, gw.Name
	reread := false
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		if reread {
			if gw, err = c.Gateway.GatewayV1().Gateways(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("read Gateway %s/%s: %w", ns, name, err)
			}
		}
		reread = true
		if gw, err = c.removeStaleListenerStatus(ctx, gw); err != nil {
			return err
		}
		return c.applyGatewayStatus(ctx, gw, svc, invalidParams)
	})
}

// removeStaleListenerStatus removes the status entries of listeners gw's
// spec no longer has (staleListenerPatch).
func (c *Cluster) removeStaleListenerStatus(ctx context.Context, gw *gatewayv1.Gateway) (*gatewayv1.Gateway, error) {
	var spec, status []gatewayv1.SectionName
	for _, l := range gw.Spec.Listeners {
		spec = append(spec, l.Name)
	}
	for _, l := range gw.Status.Listeners {
		status = append(status, l.Name)
	}
	patch := staleListenerPatch(gw.ResourceVersion, spec, status)
	if patch == nil {
		return gw, nil
	}
	out, err := c.Gateway.GatewayV1().Gateways(gw.Namespace).Patch(ctx, gw.Name, types.JSONPatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager}, "status")
	if err != nil {
		return nil, staleListenerPatchError(err, "gateways", "Gateway", gw.Namespace, gw.Name)
	}
	return out, nil
}

// staleListenerPatch is the JSON patch that removes the status entries
// (named status, in order) of listeners that spec no longer names, and
// tests resourceVersion first; nil when there are none. A server-side
// apply could only drop the provider's own fields of such an entry: the
// gateway pods' attachedRoutes or ResolvedRefs would be left as an entry
// without its required fields, which the API server refuses.
func staleListenerPatch(resourceVersion string, spec, status []gatewayv1.SectionName) []byte {
	ops := []map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": resourceVersion}}
	for i := len(status) - 1; i >= 0; i-- {
		if !slices.Contains(spec, status[i]) {
			ops = append(ops, map[string]any{"op": "remove", "path": fmt.Sprintf("/status/listeners/%d", i)})
		}
	}
	if len(ops) == 1 {
		return nil
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		panic(err) // strings and numbers always encode
	}
	return patch
}

// staleListenerPatchError is the error of a failed staleListenerPatch of
// the kind/namespace/name object (resource its API resource): a conflict
// when the resource version changed since the read, so that the caller
// reads again.
func staleListenerPatchError(err error, resource, kind, namespace, name string) error {
	if apierrors.IsInvalid(err) && strings.Contains(err.Error(), "/metadata/resourceVersion") {
		return apierrors.NewConflict(gatewayv1.Resource(resource), name, err)
	}
	return fmt.Errorf("remove the status of removed listeners of %s %s/%s: %w", kind, namespace, name, err)
}

// podsCountRoutes reports whether the gateway pods' field manager
// (gwruntime.RoutesFieldManager) owns the attachedRoutes of gw's listener
// entry named listener.
func podsCountRoutes(gw *gatewayv1.Gateway, listener gatewayv1.SectionName) bool {
	key, err := json.Marshal(map[string]string{"name": string(listener)})
	if err != nil {
		return false
	}
	for _, mf := range gw.ManagedFields {
		if mf.Manager != gwruntime.RoutesFieldManager || mf.Subresource != "status" || mf.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Status struct {
				Listeners map[string]map[string]json.RawMessage `json:"f:listeners"`
			} `json:"f:status"`
		}
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		if _, ok := fields.Status.Listeners["k:"+string(key)]["f:attachedRoutes"]; ok {
			return true
		}
	}
	return false
}

func (c *Cluster) applyGatewayStatus(ctx context.Context, gw *gatewayv1.Gateway, svc *corev1.Service, invalidParams error) error {
	var attached map[string]int32
	accepted := metav1.Condition{Type: string(gatewayv1.GatewayConditionAccepted), Status: metav1.ConditionTrue,
		Reason: string(gatewayv1.GatewayReasonAccepted), Message: "Accepted by the varnishgw provider.", ObservedGeneration: gw.Generation}
	if invalidParams != nil {
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, string(gatewayv1.GatewayReasonInvalidParameters), invalidParams.Error()
	}
	st := gatewayv1apply.GatewayStatus().WithConditions(status.Condition(gw.Status.Conditions, accepted))
	if svc != nil {
		for _, a := range ServiceAddresses(svc) {
			st.WithAddresses(gatewayv1apply.GatewayStatusAddress().WithType(*a.Type).WithValue(a.Value))
		}
	}
	for _, l := range gw.Spec.Listeners {
		var live *gatewayv1.ListenerStatus
		for i := range gw.Status.Listeners {
			if gw.Status.Listeners[i].Name == l.Name {
				live = &gw.Status.Listeners[i]
			}
		}
		var old []metav1.Condition
		var routes int32
		if live != nil {
			old = live.Conditions
		}
		if live != nil && podsCountRoutes(gw, l.Name) {
			routes = live.AttachedRoutes
		} else {
			if attached == nil {
				var err error
				if attached, err = c.AttachedRoutes(ctx, gw); err != nil {
					return err
				}
			}
			routes = attached[string(l.Name)]
		}
		ls := gatewayv1apply.ListenerStatus().
			WithName(l.Name).
			WithSupportedKinds(gatewayv1apply.RouteGroupKind().WithGroup(gatewayv1.GroupName).WithKind("HTTPRoute")).
			WithAttachedRoutes(routes).
			WithConditions(status.Condition(old, metav1.Condition{Type: string(gatewayv1.ListenerConditionAccepted), Status: metav1.ConditionTrue,
				Reason: string(gatewayv1.ListenerReasonAccepted), Message: "Served on varnishd socket " + ghostjson.SocketName(l.Port) + ".", ObservedGeneration: gw.Generation}))
		// An HTTPS listener's ResolvedRefs says whether its certificates
		// resolve, which the gateway pods find out (they read the Secrets
		// and ReferenceGrants): they are its one writer. The provider does
		// not apply it, so that its apply neither overwrites nor, as a
		// server-side apply that leaves out a field it owned, deletes it.
		if l.Protocol != gatewayv1.HTTPSProtocolType {
			ls.WithConditions(status.Condition(old, metav1.Condition{Type: string(gatewayv1.ListenerConditionResolvedRefs), Status: metav1.ConditionTrue,
				Reason: string(gatewayv1.ListenerReasonResolvedRefs), Message: "Listener references resolved.", ObservedGeneration: gw.Generation}))
		}
		st.WithListeners(ls)
	}
	// attachedListenerSets: the ListenerSets it admits with a listener
	// served.
	if gw.Spec.AllowedListeners != nil {
		cg, err := c.ComposeGateway(ctx, gw, nil)
		if err != nil {
			return err
		}
		st.WithAttachedListenerSets(cg.AttachedListenerSets())
	}
	ac := gatewayv1apply.Gateway(gw.Name, gw.Namespace).WithResourceVersion(gw.ResourceVersion).WithStatus(st)
	if _, err := c.Gateway.GatewayV1().Gateways(gw.Namespace).ApplyStatus(ctx, ac, ApplyOptions()); err != nil {
		if apierrors.IsConflict(err) {
			return err
		}
		return fmt.Errorf("set the status of Gateway %s/%s: %w", gw.Namespace, gw.Name, err)
	}
	return nil
}
