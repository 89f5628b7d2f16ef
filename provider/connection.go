package provider

import (
	"context"
	"fmt"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"k8s.io/client-go/rest"
)

// connectionModel is the provider configuration: how to reach the cluster.
// Every field is a framework type, so that a value known only after apply
// (a kubeconfig path or an exec argument taken from a cluster created in
// the same configuration) reads as unknown instead of failing Config.Get.
type connectionModel struct {
	ConfigPath           types.String `tfsdk:"config_path"`
	ConfigPaths          types.List   `tfsdk:"config_paths"`
	ConfigContext        types.String `tfsdk:"config_context"`
	Host                 types.String `tfsdk:"host"`
	Token                types.String `tfsdk:"token"`
	ClusterCACertificate types.String `tfsdk:"cluster_ca_certificate"`
	ClientCertificate    types.String `tfsdk:"client_certificate"`
	ClientKey            types.String `tfsdk:"client_key"`
	Insecure             types.Bool   `tfsdk:"insecure"`
	Exec                 types.Object `tfsdk:"exec"`
}

type execModel struct {
	APIVersion types.String `tfsdk:"api_version"`
	Command    types.String `tfsdk:"command"`
	Args       types.List   `tfsdk:"args"`
	Env        types.Map    `tfsdk:"env"`
}

// execAttrTypes are the attribute types of the exec block.
var execAttrTypes = map[string]attr.Type{
	"api_version": types.StringType,
	"command":     types.StringType,
	"args":        types.ListType{ElemType: types.StringType},
	"env":         types.MapType{ElemType: types.StringType},
}

// execBlock is the exec block e as a value of the model (null for nil);
// unset lists and maps of e may be zero values.
func execBlock(e *execModel) types.Object {
	if e == nil {
		return types.ObjectNull(execAttrTypes)
	}
	args, env := e.Args, e.Env
	if args.IsNull() {
		args = types.ListNull(types.StringType)
	}
	if env.IsNull() {
		env = types.MapNull(types.StringType)
	}
	return types.ObjectValueMust(execAttrTypes, map[string]attr.Value{
		"api_version": e.APIVersion, "command": e.Command, "args": args, "env": env,
	})
}

// exec is the exec block, nil when it is not set.
func (m connectionModel) exec() (*execModel, error) {
	if m.Exec.IsNull() || m.Exec.IsUnknown() {
		return nil, nil
	}
	var e execModel
	if d := m.Exec.As(context.Background(), &e, basetypes.ObjectAsOptions{}); d.HasError() {
		return nil, fmt.Errorf("read the exec block: %v", d)
	}
	return &e, nil
}

// hasUnknown reports whether a setting, or an element of one, is known
// only after apply.
func (m connectionModel) hasUnknown() bool {
	for _, v := range []types.String{m.ConfigPath, m.ConfigContext, m.Host, m.Token, m.ClusterCACertificate, m.ClientCertificate, m.ClientKey} {
		if v.IsUnknown() {
			return true
		}
	}
	if m.Insecure.IsUnknown() || !fullyKnown(m.ConfigPaths) || !fullyKnown(m.Exec) {
		return true
	}
	return false
}

// fullyKnown reports whether v and every value nested in it are known.
func fullyKnown(v attr.Value) bool {
	if v.IsNull() {
		return true
	}
	if v.IsUnknown() {
		return false
	}
	tv, err := v.ToTerraformValue(context.Background())
	return err == nil && tv.IsFullyKnown()
}

// stringElements are the elements of a list of strings.
func stringElements(l types.List) []string {
	var out []string
	for _, v := range l.Elements() {
		if s, ok := v.(types.String); ok {
			out = append(out, s.ValueString())
		}
	}
	return out
}

// restConfig builds the client configuration (control.Connection).
func (m connectionModel) restConfig() (*rest.Config, error) {
	conn := control.Connection{
		ConfigPath:           m.ConfigPath.ValueString(),
		ConfigPaths:          stringElements(m.ConfigPaths),
		ConfigContext:        m.ConfigContext.ValueString(),
		Host:                 m.Host.ValueString(),
		Token:                m.Token.ValueString(),
		ClusterCACertificate: m.ClusterCACertificate.ValueString(),
		ClientCertificate:    m.ClientCertificate.ValueString(),
		ClientKey:            m.ClientKey.ValueString(),
		Insecure:             m.Insecure.ValueBoolPointer(),
	}
	exec, err := m.exec()
	if err != nil {
		return nil, err
	}
	if exec != nil {
		conn.Exec = &control.ExecPlugin{APIVersion: exec.APIVersion.ValueString(), Command: exec.Command.ValueString(),
			Args: stringElements(exec.Args), Env: stringMap(exec.Env)}
	}
	return conn.RestConfig()
}
