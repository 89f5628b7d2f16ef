package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"

	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

var (
	_ resource.Resource                   = (*gatewayResource)(nil)
	_ resource.ResourceWithConfigure      = (*gatewayResource)(nil)
	_ resource.ResourceWithImportState    = (*gatewayResource)(nil)
	_ resource.ResourceWithValidateConfig = (*gatewayResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*gatewayResource)(nil)
)

// NewGatewayResource is the varnishgw_gateway resource.
func NewGatewayResource() resource.Resource { return &gatewayResource{} }

type gatewayResource struct{ c *clients }

func (r *gatewayResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_gateway"
}

func (r *gatewayResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = configureClients(req.ProviderData, &resp.Diagnostics)
}

// ValidateConfig checks the gateway as its pods will serve it: what the
// provider rejects itself, then the listeners as the routing core sees
// them, each error once, at the argument or block it is about.
func (r *gatewayResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m gatewayModel
	if d := req.Config.Get(ctx, &m); d.HasError() {
		return // unknown values: checked at apply
	}
	rejectUnsupportedGateway(&m, req.Config.Raw, &resp.Diagnostics)
	reported := map[string]bool{} // attribute paths with an error of the provider's
	for i, l := range m.Listeners {
		if p := l.Protocol.ValueString(); !l.Protocol.IsNull() && !l.Protocol.IsUnknown() && p != "HTTP" && p != "HTTPS" {
			ap := path.Root("listener").AtListIndex(i).AtName("protocol")
			reported[ap.String()] = true
			resp.Diagnostics.AddAttributeError(ap, "Unsupported listener protocol",
				fmt.Sprintf("listener %q: protocol %q is not served: varnishgw serves HTTP and HTTPS (TLS terminated in the gateway pod); "+
					"TLS passthrough, TCP and UDP are not. Set protocol = \"HTTP\" or \"HTTPS\".", l.Name.ValueString(), p))
		}
	}
	for i, l := range m.Listeners {
		ar := l.AllowedRoutes
		if ar == nil || ar.Namespaces.IsUnknown() || ar.Selector.IsUnknown() {
			continue
		}
		p := path.Root("listener").AtListIndex(i).AtName("allowed_routes")
		hasSelector := len(stringMap(ar.Selector)) > 0 || len(ar.SelectorExpressions) > 0
		switch {
		case ar.Namespaces.ValueString() == "Selector" && !hasSelector:
			reported[p.AtName("selector").String()] = true
			resp.Diagnostics.AddAttributeError(p.AtName("selector"), "Invalid allowed routes",
				fmt.Sprintf("listener %q: namespaces = \"Selector\" needs selector, the labels a route's namespace must have, for example "+
					"selector = { team = \"shop\" }, or selector_expression blocks", l.Name.ValueString()))
		case ar.Namespaces.ValueString() != "Selector" && hasSelector:
			at := p.AtName("selector")
			if len(stringMap(ar.Selector)) == 0 {
				at = p.AtName("selector_expression").AtListIndex(0)
			}
			resp.Diagnostics.AddAttributeError(at, "Invalid allowed routes",
				fmt.Sprintf("listener %q: selector and selector_expression are used only with namespaces = \"Selector\" (namespaces is %q); "+
					"set namespaces = \"Selector\" or remove them", l.Name.ValueString(), ar.Namespaces.ValueString()))
		}
	}
	if etp := m.ExternalTrafficPolicy; !etp.IsNull() && !etp.IsUnknown() && !m.ServiceType.IsUnknown() &&
		(m.ServiceType.IsNull() || m.ServiceType.ValueString() == string(corev1.ServiceTypeClusterIP)) {
		resp.Diagnostics.AddAttributeError(path.Root("external_traffic_policy"), "External traffic policy without external traffic",
			fmt.Sprintf("external_traffic_policy = %q applies to traffic from outside the cluster, which a ClusterIP Service does not take; "+
				"set service_type = \"LoadBalancer\" (or \"NodePort\"), or remove external_traffic_policy.", etp.ValueString()))
	}
	m.Pod.validate(&resp.Diagnostics)
	m.validateInvalidationPort(&resp.Diagnostics)
	m.validateProxyProtocol(&resp.Diagnostics)
	m.validateMetadataKeys(&resp.Diagnostics)
	validateCache(path.Root("cache"), field.NewPath("cache"), m.Cache, &resp.Diagnostics)
	if m.Resources != nil {
		for attr, v := range map[string]types.Map{"requests": m.Resources.Requests, "limits": m.Resources.Limits} {
			if _, err := parseResources("resources."+attr, stringMap(v)); err != nil {
				resp.Diagnostics.AddAttributeError(path.Root("resources").AtName(attr), "Invalid gateway resources", err.Error())
			}
		}
	}
	if !req.Config.Raw.IsFullyKnown() {
		return
	}
	gw, err := m.toGateway(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Invalid gateway", err.Error())
		return
	}
	var s resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &s)
	for _, e := range append(routing.ValidateGateway(gw), routing.ValidateAllowedListeners(gw)...) {
		p, text := attributePath(ctx, s.Schema, e.Field)
		switch {
		case text == "":
			resp.Diagnostics.AddError("Invalid gateway", e.Error())
		case reported[p.String()], e.Field == "spec.listeners":
			// the provider's own error says it, or the listener block's
			// validators (at least one, at most 64)
		default:
			resp.Diagnostics.AddAttributeError(diagnosticPath(req.Config.Raw, p), "Invalid gateway listener", fmt.Sprintf("%s: %s", text, e.ErrorBody()))
		}
	}
}

// validateMetadataKeys rejects a label or annotation key set in two
// attributes that reach the same object, where one would silently win.
func (m *gatewayModel) validateMetadataKeys(diags *diag.Diagnostics) {
	if m.Infrastructure == nil {
		return
	}
	infraLabels, infraAnn := stringMap(m.Infrastructure.Labels), stringMap(m.Infrastructure.Annotations)
	twice := func(p path.Path, kind, key, other string) {
		diags.AddAttributeError(p, "Key set twice",
			fmt.Sprintf("the %s %q is set in infrastructure.%ss, which apply to every object generated for the gateway, and in %s; "+
				"set it in one place", kind, key, kind, other))
	}
	if m.Pod != nil {
		for _, k := range slices.Sorted(maps.Keys(stringMap(m.Pod.Labels))) {
			if _, ok := infraLabels[k]; ok {
				twice(path.Root("pod").AtName("labels").AtMapKey(k), "label", k, "pod.labels")
			}
		}
		for _, k := range slices.Sorted(maps.Keys(stringMap(m.Pod.Annotations))) {
			if _, ok := infraAnn[k]; ok {
				twice(path.Root("pod").AtName("annotations").AtMapKey(k), "annotation", k, "pod.annotations")
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(stringMap(m.ServiceAnnotations))) {
		if _, ok := infraAnn[k]; ok {
			twice(path.Root("service_annotations").AtMapKey(k), "annotation", k, "service_annotations")
		}
	}
}

// ModifyPlan checks the gateway's pod template with a server-side dry run
// when it can be built (the class exists), so that the API server's
// errors show at plan time. For an existing gateway it also shows a change
// of the GatewayClass or of the ConfigMap of infrastructure.parameters_ref,
// and out-of-band changes of runtime objects that no attribute reflects (a
// deleted Role, an edited pod template), as an update: when the plan has no
// other change (start_hash and main_vcl_sha256 still hold the state's
// values) but the parameters as the cluster has them now give other
// hashes, or the runtime differs, they and the other computed attributes
// become unknown, so the gateway is updated. Known values are never
// planned: the class may change in the same apply, and apply computes them.
func (r *gatewayResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || r.c == nil || !req.Config.Raw.IsFullyKnown() {
		return
	}
	var plan gatewayModel
	if resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...); resp.Diagnostics.HasError() {
		return
	}
	create := req.State.Raw.IsNull()
	update := func() {
		for a, v := range map[string]attr.Value{
			"start_hash":               types.StringUnknown(),
			"main_vcl_sha256":          types.StringUnknown(),
			"addresses":                types.ListUnknown(types.StringType),
			"conditions":               types.ListUnknown(conditionType),
			"listener_attached_routes": types.MapUnknown(types.Int64Type),
		} {
			resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(a), v)...)
		}
	}
	r.c.warnCertificates(ctx, &plan, &resp.Diagnostics)
	class, err := r.c.GatewayParameters(ctx, plan.GatewayClassName.ValueString(), plan.Namespace.ValueString(), plan.Infrastructure.settings())
	if control.IsInvalidParameters(err) {
		resp.Diagnostics.AddAttributeWarning(path.Root("infrastructure").AtName("parameters_ref"), "The gateway's parameters cannot be used",
			fmt.Sprintf("%v. Unless this changes before apply (for example because this configuration creates the ConfigMap), apply fails "+
				"and sets the Gateway's Accepted condition to False with reason InvalidParameters.", err))
		if !create {
			update()
		}
		return
	}
	if err != nil {
		return // apply reports it
	}
	spec, err := plan.runtimeSpec(class)
	if err != nil {
		return
	}
	if err := r.c.addListenerSets(ctx, &plan, spec); err != nil {
		resp.Diagnostics.AddWarning("Read the gateway's ListenerSets", err.Error()+"\nThe plan may miss the ports of the gateway's ListenerSets; apply reads them again.")
	}
	dry, dryErr := r.c.DryRunDeployment(ctx, spec)
	if apierrors.IsInvalid(dryErr) {
		resp.Diagnostics.AddError("Invalid gateway pod template",
			fmt.Sprintf("The API server rejects the gateway's Deployment: %v\nFix the attribute the field belongs to (pod, or the class's parameters).", dryErr))
		return
	}
	if create || plan.StartHash.IsUnknown() || plan.MainVCLSHA256.IsUnknown() {
		return // nothing to add: created or already updated
	}
	if changed := r.c.classChanges.of(plan.GatewayClassName.ValueString()); len(changed) > 0 {
		// The class changes in this apply: the pods and main.vcl are
		// made again from what it will be.
		tflog.Info(ctx, "the gateway's class changes in this plan; the gateway is updated after it",
			map[string]any{"class": plan.GatewayClassName.ValueString(), "attributes": changed})
		update()
		return
	}
	hashOK := plan.StartHash.ValueString() == spec.StartHash()
	if !hashOK {
		// A ListenerSet's apply may have brought the pods to what the
		// gateway plans now (its ports) since the state was written.
		d, err := r.c.Kube.AppsV1().Deployments(spec.Gateway.Namespace).Get(ctx, spec.Name(), metav1.GetOptions{})
		hashOK = err == nil && d.Spec.Template.Annotations[gwruntime.StartHashAnnotation] == spec.StartHash()
	}
	if hashOK && plan.MainVCLSHA256.ValueString() == spec.MainVCLDigest() {
		drift, err := "", dryErr
		if err == nil {
			drift, err = r.c.RuntimeDrift(ctx, spec, dry)
		}
		if err != nil {
			resp.Diagnostics.AddWarning("Check the gateway runtime", err.Error()+"\nThe plan may miss changes made outside Terraform.")
			return
		}
		if drift == "" {
			return
		}
		resp.Diagnostics.AddWarning("The gateway runtime changed outside Terraform",
			fmt.Sprintf("Gateway %s: %s. The next apply restores it.", spec.Gateway, drift))
	}
	update()
}

// warnCertificates warns at plan about the certificate Secrets of the
// HTTPS listeners that will not serve when applied: a Secret that does not
// exist (yet: cert-manager, for one, creates it after the Gateway; the
// listener serves once it exists, without another apply), one that is not
// of type kubernetes.io/tls, and one in another namespace that no
// ReferenceGrant lets the Gateway use. Neither is an error: the pods pick
// the Secret up when it appears, and report it on the listener's
// ResolvedRefs condition until then. The Secret is read for its type only;
// its data never enters the plan or the state.
func (c *clients) warnCertificates(ctx context.Context, m *gatewayModel, diags *diag.Diagnostics) {
	gwNS := m.Namespace.ValueString()
	grants := map[string][]*gatewayv1.ReferenceGrant{}
	checked := map[object.Ref]bool{}
	for i, l := range m.Listeners {
		if l.TLS == nil || l.Protocol.ValueString() != string(gatewayv1.HTTPSProtocolType) {
			continue
		}
		for j, r := range l.TLS.CertificateRefs {
			if (!r.Group.IsNull() && r.Group.ValueString() != "") || (!r.Kind.IsNull() && r.Kind.ValueString() != "Secret") || r.Name.IsUnknown() {
				continue // an error of ValidateConfig
			}
			ref := object.Ref{Namespace: gwNS, Name: r.Name.ValueString()}
			if v := r.Namespace.ValueString(); v != "" {
				ref.Namespace = v
			}
			if checked[ref] {
				continue
			}
			checked[ref] = true
			at := path.Root("listener").AtListIndex(i).AtName("tls").AtName("certificate_ref").AtListIndex(j).AtName("name")
			listener := l.Name.ValueString()
			if ref.Namespace != gwNS {
				if _, ok := grants[ref.Namespace]; !ok {
					list, err := c.Gateway.GatewayV1().ReferenceGrants(ref.Namespace).List(ctx, metav1.ListOptions{})
					if err != nil {
						diags.AddAttributeWarning(at, "Cannot check the certificate's ReferenceGrant",
							fmt.Sprintf("listing the ReferenceGrants of namespace %s failed: %v. Listener %q serves Secret %s only if a ReferenceGrant there "+
								"lets Gateways of namespace %s reference it.", ref.Namespace, err, listener, ref, gwNS))
						grants[ref.Namespace] = nil
						continue
					}
					grants[ref.Namespace] = []*gatewayv1.ReferenceGrant{}
					for k := range list.Items {
						grants[ref.Namespace] = append(grants[ref.Namespace], &list.Items[k])
					}
				}
				if g := grants[ref.Namespace]; g != nil && !routing.CertificateRefPermitted(g, gwNS, ref.Namespace, ref.Name) {
					diags.AddAttributeWarning(at, "The certificate Secret is in another namespace without a ReferenceGrant",
						fmt.Sprintf("Listener %q references Secret %s, but no ReferenceGrant in namespace %s lets Gateways of namespace %s reference it. "+
							"Until one does, the listener's ResolvedRefs condition is False with reason RefNotPermitted and the certificate is not served. "+
							"Create a ReferenceGrant in %s from group gateway.networking.k8s.io, kind Gateway, namespace %s to kind Secret (name %s), "+
							"or move the Secret to namespace %s.", listener, ref, ref.Namespace, gwNS, ref.Namespace, gwNS, ref.Name, gwNS))
				}
			}
			sec, err := c.Kube.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				diags.AddAttributeWarning(at, "The certificate Secret does not exist yet",
					fmt.Sprintf("Listener %q references Secret %s, which does not exist. The listener serves once it exists, without another apply "+
						"(for example when cert-manager issues the certificate after the Gateway is created); until then its ResolvedRefs condition "+
						"is False with reason InvalidCertificateRef. If the name is wrong, fix it.", listener, ref))
			case err != nil:
				diags.AddAttributeWarning(at, "Cannot check the certificate Secret",
					fmt.Sprintf("reading Secret %s failed: %v. Listener %q serves once the Secret exists and is of type kubernetes.io/tls.", ref, err, listener))
			case sec.Type != corev1.SecretTypeTLS:
				diags.AddAttributeWarning(at, "The certificate Secret is not of type kubernetes.io/tls",
					fmt.Sprintf("Listener %q references Secret %s, whose type is %q. The gateway serves certificates from Secrets of type kubernetes.io/tls "+
						"(keys tls.crt and tls.key) only: until the Secret is one, the listener's ResolvedRefs condition is False with reason "+
						"InvalidCertificateRef. Create it with kubectl create secret tls, or let cert-manager issue it.", listener, ref, sec.Type))
			}
		}
	}
}

func (r *gatewayResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan gatewayModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	r.apply(ctx, &plan, "Create the gateway", &resp.Diagnostics, &resp.State)
}

func (r *gatewayResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan gatewayModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	r.apply(ctx, &plan, "Update the gateway", &resp.Diagnostics, &resp.State)
}

// apply writes the Gateway, its runtime and its status, then optionally
// waits for the rollout. Everything is checked before the first write, so
// an invalid configuration never replaces a working one.
func (r *gatewayResource) apply(ctx context.Context, m *gatewayModel, action string, diags *diag.Diagnostics, state *tfsdk.State) {
	setState := func() bool { diags.Append(state.Set(ctx, m)...); return !diags.HasError() }
	fail := func(format string, a ...any) { diags.AddError(action, fmt.Sprintf(format, a...)) }

	timeout, err := time.ParseDuration(m.RolloutTimeout.ValueString())
	if err != nil {
		fail("rollout_timeout = %q: %v; use a Go duration such as 10m", m.RolloutTimeout.ValueString(), err)
		return
	}
	gw, err := m.toGateway(ctx)
	if err != nil {
		fail("%v", err)
		return
	}
	if errs := routing.ValidateGateway(gw); len(errs) > 0 {
		fail("the listeners are invalid: %v", errs.ToAggregate())
		return
	}
	class, err := r.c.GatewayParameters(ctx, m.GatewayClassName.ValueString(), gw.Namespace, m.Infrastructure.settings())
	if control.IsInvalidParameters(err) {
		// As the Gateway API asks: the Gateway is written and not
		// accepted; its runtime is left as it is.
		r.rejectGateway(ctx, gw, err, fail)
		return
	}
	if err != nil {
		fail("%v", err)
		return
	}
	spec, err := m.runtimeSpec(class)
	if err != nil {
		fail("%v", err)
		return
	}
	if err := r.c.addListenerSets(ctx, m, spec); err != nil {
		fail("%v", err)
		return
	}
	// The gateway pods watch RoutingFragments and write GatewayPodReports.
	if err := r.c.EnsureAPI(ctx); err != nil {
		fail("%v", err)
		return
	}
	// The API server checks the pod template before anything is written.
	if _, err := r.c.DryRunDeployment(ctx, spec); apierrors.IsInvalid(err) {
		fail("the gateway's pod template is invalid: %v\nFix the attribute the field belongs to (pod, or the class's parameters); nothing was written.", err)
		return
	}

	live, err := r.c.ApplyGateway(ctx, gw)
	if err != nil {
		fail("%v", err)
		return
	}
	if err := r.c.ApplyRuntime(ctx, spec, live); err != nil {
		fail("%v\nFix the cause and apply again: the objects written so far are kept.", err)
		return
	}
	// The pods serve the ListenerSets' listeners the Gateway admits now.
	if cg, err := r.c.ComposeGateway(ctx, live, nil); err != nil {
		fail("%v", err)
		return
	} else if err := r.c.WriteListenerSetListeners(ctx, cg); err != nil {
		fail("%v", err)
		return
	}
	svc, err := r.c.Kube.CoreV1().Services(gw.Namespace).Get(ctx, spec.Name(), metav1.GetOptions{})
	if err != nil {
		fail("get Service %s/%s: %v", gw.Namespace, spec.Name(), err)
		return
	}
	if err := r.c.WriteGatewayStatus(ctx, live, svc, nil); err != nil {
		fail("%v", err)
		return
	}
	m.ID = types.StringValue(gw.Namespace + "/" + gw.Name)
	objs, err := r.c.ReadGateway(ctx, m.ref())
	if apierrors.IsNotFound(err) {
		err = fmt.Errorf("get Gateway %s: %w", m.ref(), err)
	}
	if err == nil {
		err = r.c.readComputed(ctx, m, objs)
	}
	if err != nil {
		fail("%v", err)
		return
	}
	if !setState() {
		return
	}
	if m.WaitForRollout.ValueBool() {
		if err := r.c.WaitRollout(ctx, spec.Gateway, timeout); err != nil {
			diags.AddError("Wait for the gateway rollout", err.Error())
			return
		}
	}
}

// rejectGateway writes the Gateway and its status with Accepted False,
// reason InvalidParameters, and reports why.
func (r *gatewayResource) rejectGateway(ctx context.Context, gw *gatewayv1.Gateway, why error, fail func(string, ...any)) {
	live, err := r.c.ApplyGateway(ctx, gw)
	if err != nil {
		fail("%v", err)
		return
	}
	svc, err := r.c.Kube.CoreV1().Services(gw.Namespace).Get(ctx, gwruntime.Name(object.Ref{Namespace: gw.Namespace, Name: gw.Name}), metav1.GetOptions{})
	if err != nil {
		svc = nil // not created yet: no addresses
	}
	if err := r.c.WriteGatewayStatus(ctx, live, svc, why); err != nil {
		fail("%v", err)
		return
	}
	fail("%v.\nThe Gateway is not accepted (condition Accepted is False, reason InvalidParameters) and its pods were not changed; "+
		"fix the ConfigMap or parameters_ref and apply again.", why)
}

func (r *gatewayResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state gatewayModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	ref := state.ref()
	// The runtime first, then the Gateway: the provider deletes every
	// object it wrote itself. The owner references (the Gateway owns the
	// namespaced runtime) are for a Gateway deleted outside Terraform; had
	// the Gateway gone first, the garbage collector would race these
	// deletions.
	if err := r.c.DeleteRuntime(ctx, ref); err != nil {
		resp.Diagnostics.AddError("Delete the gateway", err.Error()+"\nRun terraform destroy again, or delete the object by hand.")
		return
	}
	if err := r.c.DeleteGateway(ctx, ref); err != nil {
		resp.Diagnostics.AddError("Delete the gateway", err.Error()+"\nRun terraform destroy again, or delete the Gateway by hand.")
	}
}

func (r *gatewayResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	ns, name, ok := strings.Cut(req.ID, "/")
	if !ok || !dnsLabel.MatchString(ns) || !dnsSubdomain.MatchString(name) {
		resp.Diagnostics.AddError("Import the gateway",
			fmt.Sprintf("the import ID %q is not namespace/name; import a Gateway by its namespace and name, for example: terraform import varnishgw_gateway.public edge/public", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}
