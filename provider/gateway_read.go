package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/mainvcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Reading a gateway back into the varnishgw_gateway resource's model.

// readListenerTLS is the tls block of a live listener's tls. The values
// the API server defaults (mode Terminate, group "", kind Secret) stay
// unset when they were unset before (or on import).
func readListenerTLS(prior *listenerTLSModel, t *gatewayv1.ListenerTLSConfig) *listenerTLSModel {
	if t == nil {
		return nil
	}
	out := &listenerTLSModel{Mode: nonDefault(t.Mode, string(gatewayv1.TLSModeTerminate)), Options: types.MapNull(types.StringType), CertificateRefs: []certificateRefModel{}}
	if prior != nil && prior.Mode.ValueString() == string(gatewayv1.TLSModeTerminate) && t.Mode != nil && *t.Mode == gatewayv1.TLSModeTerminate {
		out.Mode = prior.Mode
	}
	if len(t.Options) > 0 {
		opts := map[string]string{}
		for k, v := range t.Options {
			opts[string(k)] = string(v)
		}
		out.Options = stringMapValue(opts)
	} else if prior != nil && !prior.Options.IsNull() && len(prior.Options.Elements()) == 0 {
		out.Options = prior.Options
	}
	for i, r := range t.CertificateRefs {
		rm := certificateRefModel{
			Group:     nonDefault(r.Group, ""),
			Kind:      nonDefault(r.Kind, "Secret"),
			Name:      types.StringValue(string(r.Name)),
			Namespace: strVal(r.Namespace),
		}
		if prior != nil && i < len(prior.CertificateRefs) {
			was := prior.CertificateRefs[i]
			if was.Group.ValueString() == "" && !was.Group.IsNull() && rm.Group.IsNull() {
				rm.Group = was.Group
			}
			if was.Kind.ValueString() == "Secret" && rm.Kind.IsNull() {
				rm.Kind = was.Kind
			}
		}
		out.CertificateRefs = append(out.CertificateRefs, rm)
	}
	return out
}

// readComputed sets the computed attributes from the gateway's objects.
func (c *clients) readComputed(ctx context.Context, m *gatewayModel, objs *control.GatewayObjects) error {
	gw := objs.Gateway
	var addrs []attr.Value
	if objs.Service != nil {
		for _, a := range control.ServiceAddresses(objs.Service) {
			addrs = append(addrs, types.StringValue(a.Value))
		}
	}
	m.Addresses = types.ListValueMust(types.StringType, nonNil(addrs))
	var conds []attr.Value
	for _, cd := range gw.Status.Conditions {
		conds = append(conds, types.ObjectValueMust(conditionType.AttrTypes, map[string]attr.Value{
			"type": types.StringValue(cd.Type), "status": types.StringValue(string(cd.Status)),
			"reason": types.StringValue(cd.Reason), "message": types.StringValue(cd.Message),
		}))
	}
	m.Conditions = types.ListValueMust(conditionType, nonNil(conds))
	attached, err := c.AttachedRoutes(ctx, gw)
	if err != nil {
		return err
	}
	counts := map[string]attr.Value{}
	for k, v := range attached {
		counts[k] = types.Int64Value(int64(v))
	}
	m.ListenerAttachedRoutes = types.MapValueMust(types.Int64Type, counts)
	m.MainVCLSHA256 = types.StringNull()
	if objs.VCL != nil {
		m.MainVCLSHA256 = types.StringValue(gwruntime.VCLDigest(objs.VCL.Data[gwruntime.VCLDataKey]))
	}
	m.StartHash = types.StringNull()
	if objs.Deployment != nil {
		if h, ok := objs.Deployment.Spec.Template.Annotations[gwruntime.StartHashAnnotation]; ok {
			m.StartHash = types.StringValue(h)
		}
	}
	return nil
}

func (r *gatewayResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state gatewayModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	if err := r.c.readGateway(ctx, &state); err != nil {
		if apierrors.IsNotFound(err) {
			resp.State.RemoveResource(ctx)
			return
		}
		resp.Diagnostics.AddError("Read the gateway", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// readGateway refreshes m from the cluster: the Gateway spec, the gateway
// VCL and the managed fields of the Deployment, Service and PDB, so that
// an out-of-band change shows in the next plan. It returns a NotFound
// error when the Gateway is gone.
func (c *clients) readGateway(ctx context.Context, m *gatewayModel) error {
	ref := m.ref()
	objs, err := c.ReadGateway(ctx, ref)
	if err != nil {
		return err
	}
	gw := objs.Gateway
	imported := m.Listeners == nil
	m.ID = types.StringValue(ref.String())
	m.GatewayClassName = types.StringValue(string(gw.Spec.GatewayClassName))
	prior := map[string]listenerModel{}
	for _, l := range m.Listeners {
		prior[l.Name.ValueString()] = l
	}
	m.Listeners = []listenerModel{}
	for _, l := range gw.Spec.Listeners {
		was := prior[string(l.Name)]
		lm := listenerModel{
			Name:     types.StringValue(string(l.Name)),
			Port:     types.Int64Value(int64(l.Port)),
			Protocol: types.StringValue(string(l.Protocol)),
			Hostname: types.StringNull(),
			TLS:      readListenerTLS(was.TLS, l.TLS),
		}
		if l.Hostname != nil {
			lm.Hostname = types.StringValue(string(*l.Hostname))
		}
		lm.AllowedRoutes = readAllowedRoutes(was.AllowedRoutes, l.AllowedRoutes)
		m.Listeners = append(m.Listeners, lm)
	}
	if m.SpecAddresses.IsNull() || m.SpecAddresses.IsUnknown() {
		m.SpecAddresses = types.ListValueMust(gatewayBlockType(ctx, path.Root("address").AtListIndex(0)), nil)
	}
	m.Infrastructure = readInfrastructure(m.Infrastructure, gw)
	m.AllowedListeners = readAllowedListeners(ctx, m.AllowedListeners, gw.Spec.AllowedListeners)
	// The cache block as the Gateway's annotation has it: a change made
	// to the annotation outside Terraform shows in the next plan. An
	// annotation the routing core rejects (the gateway pods keep their
	// routing) leaves the block as it was, so the next apply rewrites it.
	if policy, err := routing.GatewayCachePolicy(gw); err == nil {
		m.Cache = cachePolicyModelOf(policy)
	}
	// escaped_slashes likewise; unset when the Gateway has no annotation.
	if v, ok := gw.Annotations[routing.EscapedSlashesAnnotation]; ok {
		m.EscapedSlashes = types.StringValue(v)
	} else {
		m.EscapedSlashes = types.StringNull()
	}

	switch cm := objs.VCL; {
	case cm != nil:
		if v, ok := cm.Data[gwruntime.GatewayVCLKey]; ok {
			m.VCL = types.StringValue(v)
		} else {
			m.VCL = types.StringNull()
		}
		// proxy_protocol_sources as main.vcl's ACL has them.
		m.ProxyProtocolSources = proxySourcesValue(mainvcl.ProxySourcesOf(cm.Data[gwruntime.VCLDataKey]))
	default:
		// Keep vcl: main_vcl_sha256 becomes null, and the plan shows the
		// update that writes the ConfigMap again.
	}

	switch d := objs.Deployment; {
	case d != nil:
		if d.Spec.Replicas != nil {
			m.Replicas = types.Int64Value(int64(*d.Spec.Replicas))
		}
		m.Mode = types.StringValue(gwruntime.ModeSupervise)
		m.Pod = readPod(m.Pod, d.Spec.Template, infraFromGateway(gw), imported)
		m.Sysctls = readSysctls(m.Sysctls, d.Spec.Template.Spec.SecurityContext)
		for _, ctr := range d.Spec.Template.Spec.Containers {
			if ctr.Name == gwruntime.VarnishContainer {
				m.Resources = readResources(m.Resources, ctr.Resources)
			}
			if ctr.Name != gwruntime.ChaperoneContainer {
				continue
			}
			// Arguments the chaperone would refuse are drift the next
			// apply replaces; the last known values stay.
			if f, err := gwruntime.ParseChaperoneArgs(ctr.Args); err == nil {
				m.DrainTimeoutSeconds = types.Int64Value(int64(f.DrainTimeout / time.Second))
				m.Mode = types.StringValue(f.Mode)
				// http2 unset is true, the chaperone's default.
				if !f.HTTP2 || !m.HTTP2.IsNull() {
					m.HTTP2 = types.BoolValue(f.HTTP2)
				}
				// proxy_protocol unset is false, the chaperone's default.
				if f.ProxyProtocol || !m.ProxyProtocol.IsNull() {
					m.ProxyProtocol = types.BoolValue(f.ProxyProtocol)
				}
				m.InvalidationPort = invalidationPortOf(f.InvalidateAddr)
			}
			if m.Mode.ValueString() != gwruntime.ModeSidecar {
				m.Resources = readResources(m.Resources, ctr.Resources)
			}
		}
	default:
		m.Replicas = types.Int64Null() // shows as a change: the next apply recreates it
	}

	switch svc := objs.Service; {
	case svc != nil:
		m.ServiceType = types.StringValue(string(svc.Spec.Type))
		// Unset stays unset while the Service has Kubernetes' default.
		if etp := svc.Spec.ExternalTrafficPolicy; etp != "" && (etp != corev1.ServiceExternalTrafficPolicyCluster || !m.ExternalTrafficPolicy.IsNull()) {
			m.ExternalTrafficPolicy = types.StringValue(string(etp))
		} else if etp == "" {
			m.ExternalTrafficPolicy = types.StringNull()
		}
		// Only the annotations the configuration sets are the provider's;
		// on import, all but the infrastructure's.
		ann := map[string]string{}
		want := stringMap(m.ServiceAnnotations)
		infraAnn := infraFromGateway(gw).Annotations
		for k, v := range svc.Annotations {
			_, fromInfra := infraAnn[k]
			if _, ok := want[k]; ok || (imported && !fromInfra && reservedKeyPrefix(k) == "") {
				ann[k] = v
			}
		}
		if len(ann) == 0 && m.ServiceAnnotations.IsNull() {
			m.ServiceAnnotations = types.MapNull(types.StringType)
		} else {
			m.ServiceAnnotations = stringMapValue(ann)
		}
	default:
		m.ServiceType = types.StringNull()
	}

	switch pdb := objs.PDB; {
	case pdb != nil:
		if pdb.Spec.MaxUnavailable != nil {
			m.PDBMaxUnavailable = types.StringValue(pdb.Spec.MaxUnavailable.String())
		} else {
			m.PDBMaxUnavailable = types.StringNull()
		}
	default:
		m.PDBMaxUnavailable = types.StringNull()
	}

	if m.WaitForRollout.IsNull() {
		m.WaitForRollout = types.BoolValue(true)
	}
	if m.RolloutTimeout.IsNull() {
		m.RolloutTimeout = types.StringValue("10m")
	}
	return c.readComputed(ctx, m, objs)
}

// gatewayBlockType is the object type of the block at p in the gateway's
// schema.
func gatewayBlockType(ctx context.Context, p path.Path) types.ObjectType {
	var s resource.SchemaResponse
	(&gatewayResource{}).Schema(ctx, resource.SchemaRequest{}, &s)
	t, d := s.Schema.TypeAtPath(ctx, p)
	if d.HasError() {
		panic(fmt.Sprintf("no block %s in the gateway schema: %v", p, d))
	}
	return t.(types.ObjectType)
}

// readAllowedRoutes is the allowed_routes block for a live listener's
// allowedRoutes. The block stays absent (nil) while the listener admits
// the routes of its Gateway's namespace, the default, unless it was set;
// a kind's group stays unset when it is the default and was not set.
func readAllowedRoutes(prior *allowedRoutesModel, ar *gatewayv1.AllowedRoutes) *allowedRoutesModel {
	out := &allowedRoutesModel{
		Namespaces:          types.StringValue(string(gatewayv1.NamespacesFromSame)),
		Selector:            types.MapNull(types.StringType),
		SelectorExpressions: []selectorExpressionModel{},
		Kinds:               []routeKindModel{},
	}
	if ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			out.Namespaces = types.StringValue(string(*ar.Namespaces.From))
		}
		if sel := ar.Namespaces.Selector; sel != nil {
			if len(sel.MatchLabels) > 0 {
				out.Selector = stringMapValue(sel.MatchLabels)
			}
			for _, e := range sel.MatchExpressions {
				out.SelectorExpressions = append(out.SelectorExpressions, selectorExpressionModel{
					Key: types.StringValue(e.Key), Operator: types.StringValue(string(e.Operator)), Values: stringValues(e.Values),
				})
			}
		}
	}
	if ar != nil {
		for i, k := range ar.Kinds {
			km := routeKindModel{Group: nonDefault(k.Group, gatewayv1.GroupName), Kind: types.StringValue(string(k.Kind))}
			if prior != nil && i < len(prior.Kinds) && !prior.Kinds[i].Group.IsNull() && k.Group != nil && prior.Kinds[i].Group.ValueString() == string(*k.Group) {
				km.Group = prior.Kinds[i].Group
			}
			out.Kinds = append(out.Kinds, km)
		}
	}
	if prior == nil && out.Namespaces.ValueString() == string(gatewayv1.NamespacesFromSame) && out.Selector.IsNull() &&
		len(out.SelectorExpressions) == 0 && len(out.Kinds) == 0 {
		return nil
	}
	return out
}

// readResources reads the container's resources, keeping the configured
// spelling of quantities equal to the stored ones ("0.5" and "500m").
func readResources(prior *resourcesModel, rr corev1.ResourceRequirements) *resourcesModel {
	if len(rr.Requests) == 0 && len(rr.Limits) == 0 {
		return nil
	}
	read := func(list corev1.ResourceList, prior types.Map) types.Map {
		if len(list) == 0 {
			return types.MapNull(types.StringType)
		}
		was := stringMap(prior)
		out := map[string]string{}
		for k, q := range list {
			out[string(k)] = q.String()
			if p, err := k8sresource.ParseQuantity(was[string(k)]); err == nil && p.Cmp(q) == 0 {
				out[string(k)] = was[string(k)]
			}
		}
		return stringMapValue(out)
	}
	out := &resourcesModel{}
	if prior == nil {
		prior = &resourcesModel{Requests: types.MapNull(types.StringType), Limits: types.MapNull(types.StringType)}
	}
	out.Requests = read(rr.Requests, prior.Requests)
	out.Limits = read(rr.Limits, prior.Limits)
	return out
}
