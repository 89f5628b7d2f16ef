package control

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Connection is how to reach a cluster, as the provider is configured:
// kubeconfig files (ConfigPath, then ConfigPaths, merged in order) with
// ConfigContext and the explicit settings as overrides, or else Host with
// credentials. An empty setting is taken from its KUBE_* environment
// variable. Nothing falls back to localhost.
type Connection struct {
	ConfigPath           string
	ConfigPaths          []string
	ConfigContext        string
	Host                 string
	Token                string
	ClusterCACertificate string
	ClientCertificate    string
	ClientKey            string
	// Insecure, when set, decides whether the API server's certificate
	// goes unverified; unset, KUBE_INSECURE does.
	Insecure *bool
	// Exec is a client-go credential plugin, nil for none.
	Exec *ExecPlugin
}

// ExecPlugin is a credential plugin, as in a kubeconfig's exec section.
type ExecPlugin struct {
	APIVersion, Command string
	Args                []string
	Env                 map[string]string
}

// setting is v, or else the environment variable env.
func setting(v, env string) string {
	if v != "" {
		return v
	}
	return os.Getenv(env)
}

// RestConfig builds the client configuration of the connection.
func (m Connection) RestConfig() (*rest.Config, error) {
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
	if exec := m.Exec; exec != nil {
		if exec.Command == "" || exec.APIVersion == "" {
			return nil, errors.New("exec: command and api_version are both required in the exec block")
		}
		ec := &clientcmdapi.ExecConfig{
			APIVersion:      exec.APIVersion,
			Command:         exec.Command,
			Args:            exec.Args,
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}
		for _, k := range slices.Sorted(maps.Keys(exec.Env)) {
			ec.Env = append(ec.Env, clientcmdapi.ExecEnvVar{Name: k, Value: exec.Env[k]})
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

func (m Connection) insecure() (bool, error) {
	if m.Insecure != nil {
		return *m.Insecure, nil
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

// CheckGatewayAPI fails when the cluster does not serve the Gateway API
// resources the provider writes; the error says how to install the CRDs
// of release version.
func (c *Cluster) CheckGatewayAPI(version string) error {
	const gv = "gateway.networking.k8s.io/v1"
	install := fmt.Sprintf("Install the Gateway API standard channel CRDs (%s), for example:\n"+
		"  kubectl apply --server-side -f https://github.com/kubernetes-sigs/gateway-api/releases/download/%s/standard-install.yaml",
		version, version)
	list, err := c.Kube.Discovery().ServerResourcesForGroupVersion(gv)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the cluster does not serve %s: the Gateway API CRDs are not installed.\n%s", gv, install)
		}
		return fmt.Errorf("discover %s: %w", gv, err)
	}
	for _, want := range []string{"gatewayclasses", "gateways", "httproutes"} {
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == want }) {
			return fmt.Errorf("the cluster serves %s but not %s.\n%s", gv, want, install)
		}
	}
	return nil
}
