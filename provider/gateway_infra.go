package provider

import (
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"

	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The infrastructure attribute: the Gateway's spec.infrastructure.

type infrastructureModel struct {
	Labels        types.Map           `tfsdk:"labels"`
	Annotations   types.Map           `tfsdk:"annotations"`
	ParametersRef *parametersRefModel `tfsdk:"parameters_ref"`
}

type parametersRefModel struct {
	Group types.String `tfsdk:"group"`
	Kind  types.String `tfsdk:"kind"`
	Name  types.String `tfsdk:"name"`
}

func infrastructureSchema() schema.Block {
	return schema.SingleNestedBlock{
		Description: "The Gateway's spec.infrastructure. labels and annotations are written on the Gateway and on every " +
			"object generated for it (ServiceAccount, RBAC, ConfigMap, Service, Deployment and its pods, " +
			"PodDisruptionBudget, Secret); as they are on the pods, changing them rolls the pods. parameters_ref names a " +
			"ConfigMap in the gateway's namespace whose keys override the class's parameters for this gateway.",
		Attributes: map[string]schema.Attribute{
			"labels": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Labels of the Gateway's infrastructure (at most 8). The labels the provider sets (app.kubernetes.io/name, app.kubernetes.io/instance, app.kubernetes.io/managed-by, pod-template-hash) and the prefixes varnishgw.dev/ and gateway.networking.k8s.io/ are reserved.",
				Validators: []validator.Map{
					mapvalidator.SizeBetween(1, 8),
					mapvalidator.KeysAre(k8sName{"a label key", validation.IsQualifiedName}, reservedKey{}),
					mapvalidator.ValueStringsAre(k8sName{"a label value", validation.IsValidLabelValue}),
				},
			},
			"annotations": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Annotations of the Gateway's infrastructure (at most 16). The prefixes varnishgw.dev/ and gateway.networking.k8s.io/ are reserved.",
				Validators: []validator.Map{
					mapvalidator.SizeBetween(1, 16),
					mapvalidator.KeysAre(k8sName{"an annotation key", validation.IsQualifiedName}, reservedKey{}),
				},
			},
		},
		Blocks: map[string]schema.Block{
			"parameters_ref": schema.SingleNestedBlock{
				Description: "A ConfigMap in the gateway's namespace with parameters of this gateway, in the keys of the " +
					"class's parameters ConfigMap: image, image-pull-policy, storage, log-level, and varnishd-params.json " +
					"(a JSON object of strings, merged with the class's parameters by name). Each key present overrides the " +
					"class; any other key is an error. The ConfigMap is read when the gateway is planned and applied; when it " +
					"is missing or invalid, apply fails and the Gateway's Accepted condition is False with reason InvalidParameters.",
				Attributes: map[string]schema.Attribute{
					"group": schema.StringAttribute{
						Optional:    true,
						Computed:    true,
						Default:     stringdefault.StaticString(""),
						Description: "The API group of the referent: \"\" (the core group, the default).",
						Validators:  []validator.String{stringvalidator.OneOf("")},
					},
					"kind": schema.StringAttribute{
						Optional:    true,
						Computed:    true,
						Default:     stringdefault.StaticString("ConfigMap"),
						Description: "The kind of the referent: ConfigMap (the default), the only kind varnishgw reads.",
						Validators:  []validator.String{stringvalidator.OneOf("ConfigMap")},
					},
					"name": schema.StringAttribute{
						Optional:    true,
						Description: "The ConfigMap's name; required in the block.",
						Validators:  []validator.String{k8sName{"a ConfigMap name", validation.IsDNS1123Subdomain}},
					},
				},
				Validators: requires("name"),
			},
		},
	}
}

// settings are the infrastructure m describes.
func (m *infrastructureModel) settings() gwruntime.InfraSettings {
	var s gwruntime.InfraSettings
	if m == nil {
		return s
	}
	s.Labels = stringMap(m.Labels)
	s.Annotations = stringMap(m.Annotations)
	if r := m.ParametersRef; r != nil {
		s.ParametersRef = &gatewayv1.LocalParametersReference{
			Group: gatewayv1.Group(r.Group.ValueString()),
			Kind:  gatewayv1.Kind(r.Kind.ValueString()),
			Name:  r.Name.ValueString(),
		}
		if s.ParametersRef.Kind == "" {
			s.ParametersRef.Kind = "ConfigMap"
		}
	}
	return s
}

// gatewayInfrastructure is the typed spec.infrastructure of s (nil when
// empty).
func gatewayInfrastructure(s gwruntime.InfraSettings) *gatewayv1.GatewayInfrastructure {
	if len(s.Labels) == 0 && len(s.Annotations) == 0 && s.ParametersRef == nil {
		return nil
	}
	gi := &gatewayv1.GatewayInfrastructure{ParametersRef: s.ParametersRef}
	for k, v := range s.Labels {
		if gi.Labels == nil {
			gi.Labels = map[gatewayv1.LabelKey]gatewayv1.LabelValue{}
		}
		gi.Labels[gatewayv1.LabelKey(k)] = gatewayv1.LabelValue(v)
	}
	for k, v := range s.Annotations {
		if gi.Annotations == nil {
			gi.Annotations = map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{}
		}
		gi.Annotations[gatewayv1.AnnotationKey(k)] = gatewayv1.AnnotationValue(v)
	}
	return gi
}

// infraFromGateway reads spec.infrastructure.
func infraFromGateway(gw *gatewayv1.Gateway) gwruntime.InfraSettings {
	var s gwruntime.InfraSettings
	gi := gw.Spec.Infrastructure
	if gi == nil {
		return s
	}
	for k, v := range gi.Labels {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[string(k)] = string(v)
	}
	for k, v := range gi.Annotations {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[string(k)] = string(v)
	}
	s.ParametersRef = gi.ParametersRef
	return s
}

// readInfrastructure is the attribute for the Gateway's live
// spec.infrastructure.
func readInfrastructure(prior *infrastructureModel, gw *gatewayv1.Gateway) *infrastructureModel {
	s := infraFromGateway(gw)
	if len(s.Labels) == 0 && len(s.Annotations) == 0 && s.ParametersRef == nil && prior == nil {
		return nil // infrastructure = {} stays {}, no infrastructure stays null
	}
	m := &infrastructureModel{Labels: types.MapNull(types.StringType), Annotations: types.MapNull(types.StringType)}
	if len(s.Labels) > 0 {
		m.Labels = stringMapValue(s.Labels)
	}
	if len(s.Annotations) > 0 {
		m.Annotations = stringMapValue(s.Annotations)
	}
	if r := s.ParametersRef; r != nil {
		m.ParametersRef = &parametersRefModel{Group: types.StringValue(string(r.Group)), Kind: types.StringValue(string(r.Kind)), Name: types.StringValue(r.Name)}
	}
	return m
}
