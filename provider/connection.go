package provider

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// connectionModel is the provider configuration: how to reach the cluster.
type connectionModel struct {
	ConfigPath           types.String `tfsdk:"config_path"`
	ConfigPaths          []string     `tfsdk:"config_paths"`
	ConfigContext        types.String `tfsdk:"config_context"`
	Host                 types.String `tfsdk:"host"`
	Token                types.String `tfsdk:"token"`
	ClusterCACertificate types.String `tfsdk:"cluster_ca_certificate"`
	ClientCertificate    types.String `tfsdk:"client_certificate"`
	ClientKey            types.String `tfsdk:"client_key"`
	Insecure             types.Bool   `tfsdk:"insecure"`
	Exec                 *execModel   `tfsdk:"exec"`
}

type execModel struct {
	APIVersion types.String      `tfsdk:"api_version"`
	Command    types.String      `tfsdk:"command"`
	Args       []string          `tfsdk:"args"`
	Env        map[string]string `tfsdk:"env"`
}

func (m connectionModel) hasUnknown() bool {
	for _, v := range []types.String{m.ConfigPath, m.ConfigContext, m.Host, m.Token, m.ClusterCACertificate, m.ClientCertificate, m.ClientKey} {
		if v.IsUnknown() {
			return true
		}
	}
	return m.Insecure.IsUnknown() || (m.Exec != nil && (m.Exec.APIVersion.IsUnknown() || m.Exec.Command.IsUnknown()))
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
	paths = append(paths, m.ConfigPaths...)
	if len(m.ConfigPaths) == 0 {
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
	if m.Exec != nil {
		if m.Exec.Command.ValueString() == "" || m.Exec.APIVersion.ValueString() == "" {
			return nil, errors.New("exec: command and api_version are both required in the exec block")
		}
		ec := &clientcmdapi.ExecConfig{
			APIVersion:      m.Exec.APIVersion.ValueString(),
			Command:         m.Exec.Command.ValueString(),
			Args:            m.Exec.Args,
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}
		for k, v := range m.Exec.Env {
			ec.Env = append(ec.Env, clientcmdapi.ExecEnvVar{Name: k, Value: v})
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

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
