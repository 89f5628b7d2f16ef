package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
)

// allowedListenersModel is the gateway's allowed_listeners block.
type allowedListenersModel struct {
	Namespaces types.String `tfsdk:"namespaces"`
	Selector   types.Map    `tfsdk:"selector"`
}

var allowedListenersType = map[string]attr.Type{
	"namespaces": types.StringType,
	"selector":   types.MapType{ElemType: types.StringType},
}

// allowedListeners converts the allowed_listeners block: nil when it is
// absent (the Gateway admits no ListenerSet).
func (m *gatewayModel) allowedListeners(ctx context.Context) (*gatewayv1.AllowedListeners, error) {
	if m.AllowedListeners.IsNull() || m.AllowedListeners.IsUnknown() {
		return nil, nil
	}
	var al allowedListenersModel
	if d := m.AllowedListeners.As(ctx, &al, basetypes.ObjectAsOptions{}); d.HasError() {
		return nil, fmt.Errorf("read allowed_listeners: %v", d)
	}
	from := gatewayv1.NamespacesFromNone
	if !al.Namespaces.IsNull() && al.Namespaces.ValueString() != "" {
		from = gatewayv1.FromNamespaces(al.Namespaces.ValueString())
	}
	out := &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: &from}}
	if sel := stringMap(al.Selector); len(sel) > 0 {
		out.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: sel}
	}
	return out, nil
}

// readAllowedListeners is the allowed_listeners block for a live Gateway:
// null without allowedListeners; namespaces stays unset when prior had it
// unset and the Gateway has the default, None.
func readAllowedListeners(ctx context.Context, prior types.Object, al *gatewayv1.AllowedListeners) types.Object {
	if al == nil || al.Namespaces == nil {
		return types.ObjectNull(allowedListenersType)
	}
	from := types.StringValue(string(gatewayv1.NamespacesFromNone))
	if al.Namespaces.From != nil {
		from = types.StringValue(string(*al.Namespaces.From))
	}
	var was allowedListenersModel
	if !prior.IsNull() && !prior.IsUnknown() {
		if d := prior.As(ctx, &was, basetypes.ObjectAsOptions{}); !d.HasError() && was.Namespaces.IsNull() && from.ValueString() == string(gatewayv1.NamespacesFromNone) {
			from = types.StringNull()
		}
	}
	sel := types.MapNull(types.StringType)
	if s := al.Namespaces.Selector; s != nil && len(s.MatchLabels) > 0 {
		sel = stringMapValue(s.MatchLabels)
	}
	return types.ObjectValueMust(allowedListenersType, map[string]attr.Value{"namespaces": from, "selector": sel})
}

// addListenerSets adds the ports of the ListenerSet listeners the gateway
// of m serves to spec.
func (c *clients) addListenerSets(ctx context.Context, m *gatewayModel, spec *gwruntime.Spec) error {
	gw, err := m.toGateway(ctx)
	if err != nil {
		return err
	}
	cg, err := c.ComposeGateway(ctx, gw, nil)
	if err != nil {
		return err
	}
	control.AddListenerSetPorts(spec, cg)
	return nil
}

// refreshListenerSets brings everything that depends on the ListenerSets
// of gw up to date after ls (nil: none) was written or deleted: the
// status of each of them, the Gateway's annotation the pods serve the listeners
// from and its attachedListenerSets, and, when the gateway is served by
// varnishgw, its runtime (Service ports, varnishd's listen addresses). It
// reports whether the runtime changed (the pods roll).
func (c *clients) refreshListenerSets(ctx context.Context, gw *gatewayv1.Gateway, ls *gatewayv1.ListenerSet) (bool, error) {
	defer c.LockGateway(object.Ref{Namespace: gw.Namespace, Name: gw.Name})()
	cg, sets, err := c.ComposeGatewaySets(ctx, gw, ls)
	if err != nil {
		return false, err
	}
	// Every ListenerSet of the gateway: one written or deleted may change
	// which of the others' listeners conflict.
	for _, s := range sets {
		// A ListenerSet deleted since it was listed (by a parallel
		// destroy, whose own refresh follows this one) has no status.
		if err := c.WriteListenerSetStatus(ctx, cg, s); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
	}
	if err := c.WriteListenerSetListeners(ctx, cg); err != nil {
		return false, err
	}
	gwRef := object.Ref{Namespace: gw.Namespace, Name: gw.Name}
	gm := &gatewayModel{Namespace: types.StringValue(gw.Namespace), Name: types.StringValue(gw.Name),
		AllowedListeners: types.ObjectNull(allowedListenersType)}
	if err := c.readGateway(ctx, gm); err != nil {
		return false, fmt.Errorf("read gateway %s to update its runtime: %w", gwRef, err)
	}
	class, err := c.GatewayParameters(ctx, gm.GatewayClassName.ValueString(), gw.Namespace, gm.Infrastructure.settings())
	if err != nil {
		return false, fmt.Errorf("read the class of gateway %s to update its runtime: %w", gwRef, err)
	}
	spec, err := gm.runtimeSpec(class)
	if err != nil {
		return false, err
	}
	control.AddListenerSetPorts(spec, cg)
	if gm.StartHash.ValueString() == spec.StartHash() {
		svc, err := c.Kube.CoreV1().Services(gw.Namespace).Get(ctx, spec.Name(), metav1.GetOptions{})
		if err == nil {
			// The pods need not roll, but the certificate Secrets they
			// may read can have changed (a certificate_ref of an HTTPS
			// listener whose port stays).
			if err := c.ApplyCertificateAccess(ctx, spec, gw); err != nil {
				return false, fmt.Errorf("update the certificate access of gateway %s for its ListenerSets: %w", gwRef, err)
			}
			return false, c.WriteGatewayStatus(ctx, gw, svc, nil)
		}
	}
	if err := c.ApplyRuntime(ctx, spec, gw); err != nil {
		return false, fmt.Errorf("update the runtime of gateway %s for its ListenerSets: %w", gwRef, err)
	}
	svc, err := c.Kube.CoreV1().Services(gw.Namespace).Get(ctx, spec.Name(), metav1.GetOptions{})
	if err != nil {
		return true, fmt.Errorf("get Service %s/%s: %w", gw.Namespace, spec.Name(), err)
	}
	return true, c.WriteGatewayStatus(ctx, gw, svc, nil)
}
