package provider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
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

// setting is an attribute's value, or else its environment variable's.
func setting(v types.String, env string) string {
	if !v.IsNull() && v.ValueString() != "" {
		return v.ValueString()
	}
	return os.Getenv(env)
}

// restConfig builds the client configuration. A kubeconfig (config_path,
// config_paths) is loaded with config_context and explicit attributes as
// overrides; without one, host is required. Nothing falls back to localhost.
func (m connectionModel) restConfig() (*rest.Config, error) {
	var paths []string
	if p := setting(m.ConfigPath, "KUBE_CONFIG_PATH"); p != "" {
		paths = append(paths, p)
	}
	configPaths := stringElements(m.ConfigPaths)
	paths = append(paths, configPaths...)
	if len(configPaths) == 0 {
		if env := os.Getenv("KUBE_CONFIG_PATHS"); env != "" {
			paths = append(paths, filepath.SplitList(env)...)
		}
	}
	for i, p := range paths {
		expanded, err := expandHome(p)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(expanded); err != nil {
			return nil, fmt.Errorf("kubeconfig %q (config_path/config_paths): %w; fix the path or unset it", p, err)
		}
		paths[i] = expanded
	}

	overrides := &clientcmd.ConfigOverrides{}
	overrides.CurrentContext = setting(m.ConfigContext, "KUBE_CTX")
	host := setting(m.Host, "KUBE_HOST")
	overrides.ClusterInfo.Server = host
	if ca := setting(m.ClusterCACertificate, "KUBE_CLUSTER_CA_CERT_DATA"); ca != "" {
		overrides.ClusterInfo.CertificateAuthorityData = []byte(ca)
	}
	insecure, err := m.insecure()
	if err != nil {
		return nil, err
	}
	overrides.ClusterInfo.InsecureSkipTLSVerify = insecure
	overrides.AuthInfo.Token = setting(m.Token, "KUBE_TOKEN")
	if cert := setting(m.ClientCertificate, "KUBE_CLIENT_CERT_DATA"); cert != "" {
		overrides.AuthInfo.ClientCertificateData = []byte(cert)
	}
	if key := setting(m.ClientKey, "KUBE_CLIENT_KEY_DATA"); key != "" {
		overrides.AuthInfo.ClientKeyData = []byte(key)
	}
	exec, err := m.exec()
	if err != nil {
		return nil, err
	}
	if exec != nil {
		if exec.Command.ValueString() == "" || exec.APIVersion.ValueString() == "" {
			return nil, errors.New("exec: command and api_version are both required in the exec block")
		}
		ec := &clientcmdapi.ExecConfig{
			APIVersion:      exec.APIVersion.ValueString(),
			Command:         exec.Command.ValueString(),
			Args:            stringElements(exec.Args),
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}
		env := stringMap(exec.Env)
		for _, k := range slices.Sorted(maps.Keys(env)) {
			ec.Env = append(ec.Env, clientcmdapi.ExecEnvVar{Name: k, Value: env[k]})
		}
		overrides.AuthInfo.Exec = ec
	}

	if len(paths) == 0 {
		if host == "" {
			return nil, errors.New("no Kubernetes cluster is configured: set config_path (or KUBE_CONFIG_PATH) to a kubeconfig, " +
				"or host (KUBE_HOST) with credentials; the provider never falls back to localhost")
		}
		cfg, err := clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(), overrides).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("build client configuration for host %q: %w", host, err)
		}
		return cfg, nil
	}
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: paths}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %v (context %q): %w", paths, overrides.CurrentContext, err)
	}
	return cfg, nil
}

func (m connectionModel) insecure() (bool, error) {
	if !m.Insecure.IsNull() {
		return m.Insecure.ValueBool(), nil
	}
	env := os.Getenv("KUBE_INSECURE")
	if env == "" {
		return false, nil
	}
	v, err := strconv.ParseBool(env)
	if err != nil {
		return false, fmt.Errorf("KUBE_INSECURE=%q is not a boolean; use true or false", env)
	}
	return v, nil
}

func expandHome(p string) (string, error) {
	if len(p) < 2 || p[:2] != "~/" {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("expand %q: %w", p, err)
	}
	return filepath.Join(home, p[2:]), nil
}
