package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	sigsjson "sigs.k8s.io/json"
)

// podTemplateHashLabel is the label the Deployment controller puts on a
// ReplicaSet and its pods: a hash of their pod template.
const podTemplateHashLabel = appsv1.DefaultDeploymentUniqueLabelKey

// Reserved label and annotation keys: those of the runtime objects and of
// the Gateway API (GEP-1762 reserves the gateway.networking.k8s.io/ prefix).
var (
	reservedPrefixes = []string{"varnishgw.dev/", gatewayv1.GroupName + "/"}
	reservedLabels   = []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", podTemplateHashLabel}
)

// The pod attribute.

type podModel struct {
	ImagePullSecrets  types.List            `tfsdk:"image_pull_secrets"`
	NodeSelector      types.Map             `tfsdk:"node_selector"`
	Tolerations       []tolerationModel     `tfsdk:"toleration"`
	Affinity          types.String          `tfsdk:"affinity"`
	TopologySpread    []topologySpreadModel `tfsdk:"topology_spread"`
	PriorityClassName types.String          `tfsdk:"priority_class_name"`
	Labels            types.Map             `tfsdk:"labels"`
	Annotations       types.Map             `tfsdk:"annotations"`
}

type tolerationModel struct {
	Key               types.String `tfsdk:"key"`
	Operator          types.String `tfsdk:"operator"`
	Value             types.String `tfsdk:"value"`
	Effect            types.String `tfsdk:"effect"`
	TolerationSeconds types.Int64  `tfsdk:"toleration_seconds"`
}

type topologySpreadModel struct {
	MaxSkew            types.Int64  `tfsdk:"max_skew"`
	TopologyKey        types.String `tfsdk:"topology_key"`
	WhenUnsatisfiable  types.String `tfsdk:"when_unsatisfiable"`
	MinDomains         types.Int64  `tfsdk:"min_domains"`
	NodeAffinityPolicy types.String `tfsdk:"node_affinity_policy"`
	NodeTaintsPolicy   types.String `tfsdk:"node_taints_policy"`
}

func podSchema() schema.Block {
	policy := []validator.String{stringvalidator.OneOf(string(corev1.NodeInclusionPolicyHonor), string(corev1.NodeInclusionPolicyIgnore))}
	return schema.SingleNestedBlock{
		Description: "Settings of the gateway pods for the cluster they run in: image pull secrets, scheduling " +
			"(node selector, tolerations, affinity, topology spread, priority class) and extra labels and annotations. " +
			"Changing any of them rolls the pods.",
		Attributes: map[string]schema.Attribute{
			"image_pull_secrets": schema.ListAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Names of Secrets in the gateway's namespace with the credentials of the registry the class's image comes from (type kubernetes.io/dockerconfigjson).",
				Validators: []validator.List{
					listvalidator.SizeAtLeast(1),
					listvalidator.UniqueValues(),
					listvalidator.ValueStringsAre(k8sName{"a Secret name", validation.IsDNS1123Subdomain}),
				},
			},
			"node_selector": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Node labels the pods' nodes must have (nodeSelector), for example { \"node.kubernetes.io/instance-type\" = \"m7i.large\" }.",
				Validators: []validator.Map{
					mapvalidator.SizeAtLeast(1),
					mapvalidator.KeysAre(k8sName{"a label key", validation.IsQualifiedName}),
					mapvalidator.ValueStringsAre(k8sName{"a label value", validation.IsValidLabelValue}),
				},
			},
			"affinity": schema.StringAttribute{
				Optional: true,
				Description: "The pods' affinity (node affinity, pod affinity and anti-affinity) as JSON in the form of a " +
					"Kubernetes pod's spec.affinity, for example jsonencode({ podAntiAffinity = { ... } }). It is decoded " +
					"strictly: a misspelt field is an error.",
				Validators: []validator.String{affinityValidator{}},
			},
			"priority_class_name": schema.StringAttribute{
				Optional:    true,
				Description: "The PriorityClass of the pods, for example system-cluster-critical or a class of your own.",
				Validators:  []validator.String{k8sName{"a PriorityClass name", validation.IsDNS1123Subdomain}},
			},
			"labels": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Extra labels of the pods. The labels the provider sets (app.kubernetes.io/name, app.kubernetes.io/instance, app.kubernetes.io/managed-by, pod-template-hash) and the prefixes varnishgw.dev/ and gateway.networking.k8s.io/ are reserved.",
				Validators: []validator.Map{
					mapvalidator.SizeAtLeast(1),
					mapvalidator.KeysAre(k8sName{"a label key", validation.IsQualifiedName}, reservedKey{}),
					mapvalidator.ValueStringsAre(k8sName{"a label value", validation.IsValidLabelValue}),
				},
			},
			"annotations": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Extra annotations of the pods, for example for a metrics scraper. The prefixes varnishgw.dev/ and gateway.networking.k8s.io/ are reserved.",
				Validators: []validator.Map{
					mapvalidator.SizeAtLeast(1),
					mapvalidator.KeysAre(k8sName{"an annotation key", validation.IsQualifiedName}, reservedKey{}),
				},
			},
		},
		Blocks: map[string]schema.Block{
			"toleration": schema.ListNestedBlock{
				Description: "A taint the pods tolerate, as in a pod's tolerations; one block per toleration.",
				NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
					"key": schema.StringAttribute{
						Optional:    true,
						Description: "The taint key; unset with operator Exists to tolerate every taint.",
						Validators:  []validator.String{k8sName{"a taint key", validation.IsQualifiedName}},
					},
					"operator": schema.StringAttribute{
						Optional:    true,
						Description: "Equal (the default when unset: the taint's value must be value) or Exists (any value).",
						Validators:  []validator.String{stringvalidator.OneOf(string(corev1.TolerationOpEqual), string(corev1.TolerationOpExists))},
					},
					"value": schema.StringAttribute{
						Optional:    true,
						Description: "The taint value, with operator Equal.",
					},
					"effect": schema.StringAttribute{
						Optional:    true,
						Description: "The taint effect tolerated: NoSchedule, PreferNoSchedule or NoExecute; every effect when unset.",
						Validators: []validator.String{stringvalidator.OneOf(string(corev1.TaintEffectNoSchedule),
							string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute))},
					},
					"toleration_seconds": schema.Int64Attribute{
						Optional:    true,
						Description: "With effect NoExecute: how long a pod stays on a node after the taint appears; forever when unset.",
						Validators:  []validator.Int64{int64validator.AtLeast(0)},
					},
				}},
			},
			"topology_spread": schema.ListNestedBlock{
				Description: "A topology spread constraint over the gateway's own pods of the current pod template, for " +
					"example one per zone: topology_spread { topology_key = \"topology.kubernetes.io/zone\" max_skew = 1 }. The label " +
					"selector is the gateway's pod selector, with matchLabelKeys pod-template-hash.",
				NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
					"max_skew": schema.Int64Attribute{
						Required:    true,
						Description: "The largest difference allowed between the number of gateway pods in two domains.",
						Validators:  []validator.Int64{int64validator.AtLeast(1)},
					},
					"topology_key": schema.StringAttribute{
						Required:    true,
						Description: "The node label whose values are the domains, for example topology.kubernetes.io/zone or kubernetes.io/hostname.",
						Validators:  []validator.String{k8sName{"a label key", validation.IsQualifiedName}},
					},
					"when_unsatisfiable": schema.StringAttribute{
						Optional:    true,
						Computed:    true,
						Default:     stringdefault.StaticString(string(corev1.DoNotSchedule)),
						Description: "DoNotSchedule (the default) keeps a pod pending rather than break the constraint; ScheduleAnyway only prefers nodes that keep it.",
						Validators:  []validator.String{stringvalidator.OneOf(string(corev1.DoNotSchedule), string(corev1.ScheduleAnyway))},
					},
					"min_domains": schema.Int64Attribute{
						Optional:    true,
						Description: "With DoNotSchedule: the number of domains counted as existing even when fewer have nodes.",
						Validators:  []validator.Int64{int64validator.AtLeast(1)},
					},
					"node_affinity_policy": schema.StringAttribute{
						Optional:    true,
						Description: "Honor (the Kubernetes default) or Ignore the pods' node affinity and node selector when counting domains.",
						Validators:  policy,
					},
					"node_taints_policy": schema.StringAttribute{
						Optional:    true,
						Description: "Honor or Ignore (the Kubernetes default) node taints when counting domains.",
						Validators:  policy,
					},
				}},
			},
		},
	}
}

// settings are the pod settings m describes; errors name the attribute.
func (m *podModel) settings() (gwruntime.PodSettings, error) {
	var p gwruntime.PodSettings
	if m == nil {
		return p, nil
	}
	for _, v := range m.ImagePullSecrets.Elements() {
		p.ImagePullSecrets = append(p.ImagePullSecrets, v.(types.String).ValueString())
	}
	p.NodeSelector = stringMap(m.NodeSelector)
	for _, t := range m.Tolerations {
		p.Tolerations = append(p.Tolerations, corev1.Toleration{
			Key:               t.Key.ValueString(),
			Operator:          corev1.TolerationOperator(t.Operator.ValueString()),
			Value:             t.Value.ValueString(),
			Effect:            corev1.TaintEffect(t.Effect.ValueString()),
			TolerationSeconds: t.TolerationSeconds.ValueInt64Pointer(),
		})
	}
	if !m.Affinity.IsNull() {
		a, err := decodeAffinity(m.Affinity.ValueString())
		if err != nil {
			return p, fmt.Errorf("pod.affinity: %w", err)
		}
		p.Affinity = a
	}
	for _, t := range m.TopologySpread {
		c := corev1.TopologySpreadConstraint{
			MaxSkew:           int32(t.MaxSkew.ValueInt64()),
			TopologyKey:       t.TopologyKey.ValueString(),
			WhenUnsatisfiable: corev1.UnsatisfiableConstraintAction(t.WhenUnsatisfiable.ValueString()),
		}
		if c.WhenUnsatisfiable == "" {
			c.WhenUnsatisfiable = corev1.DoNotSchedule
		}
		if !t.MinDomains.IsNull() {
			n := int32(t.MinDomains.ValueInt64())
			c.MinDomains = &n
		}
		if v := t.NodeAffinityPolicy.ValueString(); v != "" {
			pol := corev1.NodeInclusionPolicy(v)
			c.NodeAffinityPolicy = &pol
		}
		if v := t.NodeTaintsPolicy.ValueString(); v != "" {
			pol := corev1.NodeInclusionPolicy(v)
			c.NodeTaintsPolicy = &pol
		}
		p.TopologySpread = append(p.TopologySpread, c)
	}
	p.PriorityClassName = m.PriorityClassName.ValueString()
	p.Labels = stringMap(m.Labels)
	p.Annotations = stringMap(m.Annotations)
	return p, nil
}

// validate checks what the attribute validators cannot see: fields that
// depend on each other, as the API server would reject them.
func (m *podModel) validate(diags *diag.Diagnostics) {
	if m == nil {
		return
	}
	for i, t := range m.Tolerations {
		p := path.Root("pod").AtName("toleration").AtListIndex(i)
		op := t.Operator.ValueString()
		switch {
		case t.Key.IsUnknown() || t.Operator.IsUnknown() || t.Value.IsUnknown() || t.Effect.IsUnknown() || t.TolerationSeconds.IsUnknown():
		case op == string(corev1.TolerationOpExists) && t.Value.ValueString() != "":
			diags.AddAttributeError(p.AtName("value"), "Invalid toleration",
				fmt.Sprintf("value = %q is set with operator = \"Exists\", which tolerates every value; remove value, or use operator = \"Equal\"", t.Value.ValueString()))
		case t.Key.ValueString() == "" && op != string(corev1.TolerationOpExists):
			diags.AddAttributeError(p.AtName("key"), "Invalid toleration",
				"a toleration without key tolerates every taint and needs operator = \"Exists\"; set key, or set operator = \"Exists\"")
		case !t.TolerationSeconds.IsNull() && t.Effect.ValueString() != string(corev1.TaintEffectNoExecute):
			diags.AddAttributeError(p.AtName("toleration_seconds"), "Invalid toleration",
				fmt.Sprintf("toleration_seconds applies to effect NoExecute only (effect is %q); set effect = \"NoExecute\" or remove toleration_seconds", t.Effect.ValueString()))
		}
	}
	for i, t := range m.TopologySpread {
		if !t.MinDomains.IsNull() && !t.MinDomains.IsUnknown() && t.WhenUnsatisfiable.ValueString() == string(corev1.ScheduleAnyway) {
			diags.AddAttributeError(path.Root("pod").AtName("topology_spread").AtListIndex(i).AtName("min_domains"), "Invalid topology spread",
				"min_domains applies to when_unsatisfiable = \"DoNotSchedule\" only; remove min_domains or use DoNotSchedule")
		}
	}
}

// readPod reads the pod attribute from the live pod template. Labels and
// annotations are those the configuration sets (all but the provider's and
// the infrastructure's on import); affinity keeps the configured JSON when
// it means the same.
func readPod(prior *podModel, tpl corev1.PodTemplateSpec, infra gwruntime.InfraSettings, imported bool) *podModel {
	wasSet := prior != nil
	if prior == nil {
		prior = &podModel{}
	}
	ps := tpl.Spec
	out := &podModel{
		ImagePullSecrets:  types.ListNull(types.StringType),
		NodeSelector:      types.MapNull(types.StringType),
		Affinity:          types.StringNull(),
		PriorityClassName: types.StringNull(),
	}
	if len(ps.ImagePullSecrets) > 0 {
		var names []string
		for _, s := range ps.ImagePullSecrets {
			names = append(names, s.Name)
		}
		out.ImagePullSecrets = stringListValue(names)
	}
	if len(ps.NodeSelector) > 0 {
		out.NodeSelector = stringMapValue(ps.NodeSelector)
	}
	out.Tolerations = []tolerationModel{}
	for _, t := range ps.Tolerations {
		out.Tolerations = append(out.Tolerations, tolerationModel{
			Key:               optString(t.Key),
			Operator:          optString(string(t.Operator)),
			Value:             optString(t.Value),
			Effect:            optString(string(t.Effect)),
			TolerationSeconds: types.Int64PointerValue(t.TolerationSeconds),
		})
	}
	if ps.Affinity != nil {
		out.Affinity = types.StringValue(normalJSON(ps.Affinity))
		if was, err := decodeAffinity(prior.Affinity.ValueString()); err == nil && equality.Semantic.DeepEqual(was, ps.Affinity) {
			out.Affinity = prior.Affinity
		}
	}
	out.TopologySpread = []topologySpreadModel{}
	for _, t := range ps.TopologySpreadConstraints {
		m := topologySpreadModel{
			MaxSkew:            types.Int64Value(int64(t.MaxSkew)),
			TopologyKey:        types.StringValue(t.TopologyKey),
			WhenUnsatisfiable:  types.StringValue(string(t.WhenUnsatisfiable)),
			MinDomains:         types.Int64Null(),
			NodeAffinityPolicy: types.StringNull(),
			NodeTaintsPolicy:   types.StringNull(),
		}
		if t.MinDomains != nil {
			m.MinDomains = types.Int64Value(int64(*t.MinDomains))
		}
		if t.NodeAffinityPolicy != nil {
			m.NodeAffinityPolicy = types.StringValue(string(*t.NodeAffinityPolicy))
		}
		if t.NodeTaintsPolicy != nil {
			m.NodeTaintsPolicy = types.StringValue(string(*t.NodeTaintsPolicy))
		}
		out.TopologySpread = append(out.TopologySpread, m)
	}
	out.PriorityClassName = optString(ps.PriorityClassName)

	// The provider's own labels and annotations and the infrastructure's
	// are not pod.labels or pod.annotations.
	own := func(k string) bool {
		return slices.Contains(reservedLabels, k) || reservedKeyPrefix(k) != "" || k == gwruntime.StartHashAnnotation
	}
	pick := func(live map[string]string, infra map[string]string, configured types.Map) types.Map {
		want := stringMap(configured)
		got := map[string]string{}
		for k, v := range live {
			_, fromInfra := infra[k]
			if _, ok := want[k]; ok || (imported && !own(k) && !fromInfra) {
				got[k] = v
			}
		}
		if len(got) == 0 {
			return types.MapNull(types.StringType)
		}
		return stringMapValue(got)
	}
	out.Labels = pick(tpl.Labels, infra.Labels, prior.Labels)
	out.Annotations = pick(tpl.Annotations, infra.Annotations, prior.Annotations)

	empty := out.ImagePullSecrets.IsNull() && out.NodeSelector.IsNull() && len(out.Tolerations) == 0 && out.Affinity.IsNull() &&
		len(out.TopologySpread) == 0 && out.PriorityClassName.IsNull() && out.Labels.IsNull() && out.Annotations.IsNull()
	if empty && !wasSet {
		return nil // pod = {} stays {}, no pod stays null
	}
	return out
}

// decodeAffinity decodes JSON strictly into a pod's affinity: unknown and
// duplicate fields are errors that name the field.
func decodeAffinity(s string) (*corev1.Affinity, error) {
	a := &corev1.Affinity{}
	strict, err := sigsjson.UnmarshalStrict([]byte(s), a, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("not the JSON of a Kubernetes affinity: %v", err)
	}
	if len(strict) > 0 {
		var msgs []string
		for _, e := range strict {
			msgs = append(msgs, e.Error())
		}
		return nil, fmt.Errorf("%s; the fields are those of a pod's spec.affinity (nodeAffinity, podAffinity, podAntiAffinity and below)", strings.Join(msgs, "; "))
	}
	return a, nil
}

// normalJSON is v's JSON as Terraform's jsonencode writes it: keys sorted,
// no white space; empty fields left out as the API types do.
func normalJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return string(b)
	}
	b, _ = json.Marshal(generic)
	return string(b)
}

func optString(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

func stringListValue(s []string) types.List {
	vals := make([]attr.Value, len(s))
	for i, v := range s {
		vals[i] = types.StringValue(v)
	}
	return types.ListValueMust(types.StringType, vals)
}

// affinityValidator checks affinity with decodeAffinity.
type affinityValidator struct{}

func (affinityValidator) Description(context.Context) string {
	return "the JSON of a pod's spec.affinity"
}
func (v affinityValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (affinityValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := decodeAffinity(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid pod affinity",
			fmt.Sprintf("%v. Write it with jsonencode, for example affinity = jsonencode({ nodeAffinity = { requiredDuringSchedulingIgnoredDuringExecution = { nodeSelectorTerms = [{ matchExpressions = [{ key = \"kubernetes.io/arch\", operator = \"In\", values = [\"amd64\"] }] }] } } })", err))
	}
}

// k8sName checks a string with one of apimachinery's validation functions
// (label keys and values, DNS names), whose messages say what is allowed.
type k8sName struct {
	what  string
	check func(string) []string
}

func (v k8sName) Description(context.Context) string { return "must be " + v.what }
func (v k8sName) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}
func (v k8sName) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if errs := v.check(req.ConfigValue.ValueString()); len(errs) > 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid "+strings.TrimPrefix(strings.TrimPrefix(v.what, "a "), "an "),
			fmt.Sprintf("%q is not %s: %s", req.ConfigValue.ValueString(), v.what, strings.Join(errs, "; ")))
	}
}

// reservedKeyPrefix is the reserved prefix k has, or "".
func reservedKeyPrefix(k string) string {
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(k, p) {
			return p
		}
	}
	return ""
}

// reservedKey rejects the label and annotation keys the provider and the
// Gateway API reserve.
type reservedKey struct{}

func (reservedKey) Description(context.Context) string {
	return "must not be a selector label or use the prefix varnishgw.dev/ or gateway.networking.k8s.io/"
}
func (v reservedKey) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (reservedKey) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	k := req.ConfigValue.ValueString()
	if slices.Contains(reservedLabels, k) {
		resp.Diagnostics.AddAttributeError(req.Path, "Reserved label key",
			fmt.Sprintf("%q is a label the provider sets on the gateway's objects and selects its pods by (%s); an extra value would "+
				"break the Deployment's selector. Use another key, for example example.com/team.", k, strings.Join(reservedLabels, ", ")))
		return
	}
	if p := reservedKeyPrefix(k); p != "" {
		resp.Diagnostics.AddAttributeError(req.Path, "Reserved key prefix",
			fmt.Sprintf("%q uses the prefix %s, which is reserved (varnishgw.dev/ for the provider's own keys, gateway.networking.k8s.io/ "+
				"for the Gateway API's, GEP-1762); use a prefix of your own, for example example.com/", k, p))
	}
}

// sysctlName matches a sysctl name as Kubernetes validates one in a pod's
// securityContext.sysctls: segments of lower-case letters, digits, - and _
// that start and end with a letter or digit, separated by dots or slashes.
// (Kubernetes' own check is in k8s.io/kubernetes, which cannot be imported,
// and neither apimachinery nor component-helpers export one.)
var sysctlName = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

// sysctlNameMaxLength is the longest sysctl name Kubernetes accepts.
const sysctlNameMaxLength = 253

// sysctlsValidators check the sysctls attribute at plan: names as
// Kubernetes accepts them, other than the provider's own, and values that
// are not empty.
func sysctlsValidators() []validator.Map {
	return []validator.Map{
		mapvalidator.KeysAre(
			stringvalidator.LengthAtMost(sysctlNameMaxLength),
			stringvalidator.RegexMatches(sysctlName, "must be a sysctl name: segments of lower-case letters, digits, - and _ "+
				"separated by dots or slashes, for example net.ipv4.tcp_migrate_req"),
			providerSysctl{},
		),
		mapvalidator.ValueStringsAre(stringvalidator.RegexMatches(regexp.MustCompile(`\S`),
			"must be the sysctl's value, for example \"1\", not empty")),
		distinctSysctls{},
	}
}

// sysctlDotted is a sysctl name with dots as separators, as Kubernetes
// normalizes it: a name whose first separator is a slash uses slashes as
// separators and may have dots inside its segments (net/ipv4/conf/eth0.100/
// forwarding is net.ipv4.conf.eth0/100.forwarding).
func sysctlDotted(name string) string {
	if i := strings.IndexAny(name, "./"); i < 0 || name[i] == '.' {
		return name
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '/':
			return '.'
		case '.':
			return '/'
		}
		return r
	}, name)
}

// distinctSysctls rejects two keys that name one sysctl, one with dots and
// one with slashes: the API server would take both, and the kernel one value.
type distinctSysctls struct{}

func (distinctSysctls) Description(context.Context) string {
	return "must name each sysctl once, with dots or with slashes"
}
func (v distinctSysctls) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (distinctSysctls) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	seen := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(req.ConfigValue.Elements())) {
		d := sysctlDotted(k)
		if prev, ok := seen[d]; ok {
			resp.Diagnostics.AddAttributeError(req.Path.AtMapKey(k), "Sysctl named twice",
				fmt.Sprintf("sysctls[%q] and sysctls[%q] name the same sysctl, %s (slashes and dots are both separators): keep one of them.", prev, k, d))
			continue
		}
		seen[d] = k
	}
}

// providerSysctl rejects the sysctl the provider sets itself,
// gwruntime.UnprivilegedPortSysctl, in either spelling.
type providerSysctl struct{}

func (providerSysctl) Description(context.Context) string {
	return "must not be " + gwruntime.UnprivilegedPortSysctl + ", which the provider sets"
}
func (v providerSysctl) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (providerSysctl) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if k := req.ConfigValue.ValueString(); sysctlDotted(k) == gwruntime.UnprivilegedPortSysctl {
		resp.Diagnostics.AddAttributeError(req.Path, "Sysctl set by the provider",
			fmt.Sprintf("%q is set by the provider from the gateway's lowest listener port, so that varnishd, which runs as a "+
				"non-root user, can bind ports below 1024. Remove it from sysctls.", k))
	}
}

// readSysctls reads the sysctls attribute back from the pods' security
// context: every sysctl but the provider's own. Unset stays unset while
// the pods have no other.
func readSysctls(prior types.Map, sc *corev1.PodSecurityContext) types.Map {
	got := map[string]string{}
	if sc != nil {
		for _, s := range sc.Sysctls {
			if s.Name != gwruntime.UnprivilegedPortSysctl {
				got[s.Name] = s.Value
			}
		}
	}
	if len(got) == 0 && prior.IsNull() {
		return types.MapNull(types.StringType)
	}
	return stringMapValue(got)
}
