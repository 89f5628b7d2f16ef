package provider

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1apply "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1apply "k8s.io/client-go/applyconfigurations/policy/v1"
	rbacv1apply "k8s.io/client-go/applyconfigurations/rbac/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1apply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/mainvcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

// The layout of a gateway pod.
const (
	// StartHashAnnotation on the pod template is a hash of what varnishd and
	// the chaperone read at start; VCL and routing are not part of it, so
	// only start-time changes roll the pods.
	StartHashAnnotation = "varnishgw.dev/start-hash"
	// gatewayVCLKey keeps the Gateway's own vcl attribute in the VCL
	// ConfigMap beside main.vcl, so that import and drift detection can
	// read it back.
	gatewayVCLKey  = "gateway.vcl"
	chaperoneName  = "chaperone"
	stateVolume    = "state"
	stateDir       = "/var/lib/varnishgw"
	healthPort     = 9091
	healthPortName = "health"
	// invalidatePortName names the container port of the chaperone's
	// invalidation endpoint (invalidation_endpoint_port).
	invalidatePortName = "invalidate"
	preStopSleep       = 5  // seconds for endpoints to drop the pod before the drain starts
	graceAfterDrain    = 30 // seconds of terminationGracePeriodSeconds beyond the drain timeout
	varnishName        = "varnish"
	workDir            = stateDir + "/varnishd"
	secretVolume       = "admin-secret"
	secretDir          = "/etc/varnishgw/secret"
	secretKey          = "secret"
	bootVolume         = "boot-vcl"
	bootDir            = "/etc/varnishgw/boot"
	bootVCLKey         = "boot.vcl"
	varnishdBin        = "/usr/sbin/varnishd"
	chaperoneBin       = "/usr/local/bin/chaperone" // in the gateway image, beside varnishd
	adminAddr          = "127.0.0.1:6082"
	ghostAdminAddr     = "127.0.0.1:6084"
	modeSupervise      = "supervise"
	modeSidecar        = "sidecar"
	rolloutPollEvery   = time.Second
	// tlsVolume holds hitch's configuration, the certificates and keys
	// (mode 0600) and varnishd's TLS sockets: memory-backed, so keys never
	// reach a node's disk, and mounted at the chaperone's default --tls-dir
	// (both containers in sidecar mode: varnishd opens the sockets).
	tlsVolume = "tls"
	// tlsVolumeSize bounds the memory the TLS volume may take: PEM files of
	// up to 64 certificates per listener, a configuration and sockets.
	tlsVolumeSize = "16Mi"
)

// classDefaults are the GatewayClass parameters a gateway inherits.
type classDefaults struct {
	image, pullPolicy, storage, vcl, logLevel string
	params                                    map[string]string
	accessLog                                 bool
	// externalNames: the class's external_name_services (chaperone
	// --external-name-services).
	externalNames bool
}

// gatewayClassDefaults reads the GatewayClass name and its parameters
// ConfigMap. The class must be served by varnishgw and name an image.
func (c *clients) gatewayClassDefaults(ctx context.Context, name string) (*classDefaults, error) {
	gc, err := c.gateway.GatewayV1().GatewayClasses().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("gateway_class_name %q: the GatewayClass does not exist; create it first (resource varnishgw_gateway_class) or fix the name", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get GatewayClass %s: %w", name, err)
	}
	if gc.Spec.ControllerName != ControllerName {
		return nil, fmt.Errorf("gateway_class_name %q: the GatewayClass has controllerName %q, not %q, so varnishgw does not serve it; use a class created by varnishgw_gateway_class",
			name, gc.Spec.ControllerName, ControllerName)
	}
	ref := gc.Spec.ParametersRef
	if ref == nil {
		return nil, fmt.Errorf("GatewayClass %s has no parametersRef, so its gateways have no image; apply its varnishgw_gateway_class again", name)
	}
	if ref.Kind != "ConfigMap" || ref.Group != "" || ref.Namespace == nil {
		return nil, fmt.Errorf("GatewayClass %s: parametersRef %s/%s is not a namespaced core ConfigMap; apply its varnishgw_gateway_class again", name, ref.Kind, ref.Name)
	}
	cm, err := c.kube.CoreV1().ConfigMaps(string(*ref.Namespace)).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get the parameters ConfigMap %s/%s of GatewayClass %s: %w", *ref.Namespace, ref.Name, name, err)
	}
	d := &classDefaults{storage: DefaultStorage, pullPolicy: DefaultImagePullPolicy, logLevel: "info", params: map[string]string{}}
	if err := d.merge(cm.Data, true); err != nil {
		return nil, fmt.Errorf("GatewayClass %s: parameters ConfigMap %s/%s: %w; apply its varnishgw_gateway_class again", name, *ref.Namespace, ref.Name, err)
	}
	if d.image == "" {
		return nil, fmt.Errorf("GatewayClass %s: parameters ConfigMap %s/%s has no %s, so its gateways have no image; set image on its varnishgw_gateway_class and apply it",
			name, *ref.Namespace, ref.Name, classKeyImage)
	}
	return d, nil
}

// merge sets d from the data of a parameters ConfigMap: each key present
// replaces d's value, and varnishd parameters are merged by name. A
// class's ConfigMap (class true) may hold user.vcl; anything else, or a
// value the pods could not use, is an error naming the key.
func (d *classDefaults) merge(data map[string]string, class bool) error {
	for _, k := range slices.Sorted(maps.Keys(data)) {
		v := data[k]
		switch k {
		case classKeyImage:
			if _, err := parseImage(v); err != nil {
				return fmt.Errorf("key %s: %w", k, err)
			}
			d.image = v
		case classKeyImagePullPolicy:
			switch corev1.PullPolicy(v) {
			case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
			default:
				return fmt.Errorf("key %s is %q, not Always, IfNotPresent or Never", k, v)
			}
			d.pullPolicy = v
		case classKeyStorage:
			if v == "" {
				return fmt.Errorf("key %s is empty; give a varnishd storage such as malloc,1g", k)
			}
			d.storage = v
		case classKeyLogLevel:
			if !slices.Contains([]string{"debug", "info", "warn", "error"}, v) {
				return fmt.Errorf("key %s is %q, not debug, info, warn or error", k, v)
			}
			d.logLevel = v
		case classKeyParams:
			params := map[string]string{}
			if err := json.Unmarshal([]byte(v), &params); err != nil {
				return fmt.Errorf("key %s is not a JSON object of strings (%v)", k, err)
			}
			for name, pv := range params {
				if !paramName.MatchString(name) {
					return fmt.Errorf("key %s: %q is not a varnishd parameter name", k, name)
				}
				d.params[name] = pv
			}
		case classKeyAccessLog:
			if !class {
				return fmt.Errorf("key %s is a class parameter only; set access_log on the varnishgw_gateway_class", k)
			}
			switch v {
			case "true", "false":
				d.accessLog = v == "true"
			default:
				return fmt.Errorf("key %s is %q, not true or false", k, v)
			}
		case classKeyExternalNames:
			if !class {
				return fmt.Errorf("key %s is a class parameter only; set external_name_services on the varnishgw_gateway_class", k)
			}
			switch v {
			case "true", "false":
				d.externalNames = v == "true"
			default:
				return fmt.Errorf("key %s is %q, not true or false", k, v)
			}
		case classKeyVCL:
			if !class {
				return fmt.Errorf("key %s is a class parameter only; set the gateway's own VCL with the vcl attribute of varnishgw_gateway", k)
			}
			d.vcl = v
		default:
			if class {
				continue // written by another version of the provider
			}
			return fmt.Errorf("key %q is not a gateway parameter; the keys are %s, %s, %s, %s and %s",
				k, classKeyImage, classKeyImagePullPolicy, classKeyStorage, classKeyParams, classKeyLogLevel)
		}
	}
	return nil
}

// runtimeSpec is everything the gateway's runtime objects are built from.
type runtimeSpec struct {
	gw         routing.ObjectRef
	className  string
	class      *classDefaults // with the gateway's parametersRef applied
	pod        podSettings
	infra      infraSettings
	gatewayVCL *string
	ports      []int32 // distinct, sorted
	// tlsPorts are the ports of the HTTPS listeners (a subset of ports):
	// hitch terminates TLS on them and hands connections to varnishd's
	// Unix socket port-N in the TLS volume.
	tlsPorts []int32
	// noHTTP2 turns HTTP/2 off on the HTTPS listeners (chaperone
	// --http2=false); the zero value is the chaperone's default, on.
	noHTTP2 bool
	// proxyProtocol makes every listener take the PROXY protocol from a
	// load balancer in front (chaperone --proxy-protocol): varnishd's HTTP
	// sockets expect it, and hitch passes it on on the HTTPS ports.
	proxyProtocol bool
	// proxySources are proxy_protocol_sources, sorted: main.vcl's ACL of
	// the peers whose PROXY header varnishd honours.
	proxySources []netip.Prefix
	// invalidatePort is the port of the chaperone's authenticated POST
	// /invalidate endpoint (invalidation_endpoint_port); 0: none.
	invalidatePort int32
	// sysctls are the sysctls attribute: set in the pods' security
	// context after the provider's own unprivilegedPortSysctl, by name.
	sysctls map[string]string
	// certSecrets are the certificate Secrets the HTTPS listeners reference
	// (routing.CertificateSecrets): the pods may read exactly those.
	certSecrets []routing.ObjectRef
	// listenerSets are the ListenerSets with an HTTPS listener the pods
	// serve: the pods keep the ResolvedRefs condition of those listeners
	// current, and may patch the status of exactly these ListenerSets
	// (applyListenerSetStatusRoles).
	listenerSets []routing.ObjectRef
	// externalTrafficPolicy is the Service's, empty: Kubernetes' default.
	externalTrafficPolicy corev1.ServiceExternalTrafficPolicy
	replicas              int32
	mode                  string
	drainTimeout          int64 // seconds
	serviceType           corev1.ServiceType
	annotations           map[string]string
	maxUnavail            intstr.IntOrString
	requests              corev1.ResourceList
	limits                corev1.ResourceList
}

func (s *runtimeSpec) name() string { return gwruntime.Name(s.gw) }

// labels are the runtime objects' labels: gwruntime.Labels plus the
// provider's managedLabels.
func runtimeLabels(gw routing.ObjectRef) map[string]string {
	l := gwruntime.Labels(gw)
	maps.Copy(l, managedLabels)
	return l
}

// chaperoneFlags are the chaperone's flags in a gateway pod (see
// design/chaperone.md).
func (s *runtimeSpec) chaperoneFlags() gwruntime.ChaperoneFlags {
	f := gwruntime.DefaultChaperoneFlags()
	f.RoutingSource = gwruntime.RoutingKubernetes
	f.Gateway = s.gw.String()
	f.VCLPath = "" // from the Gateway's VCL ConfigMap
	// main.vcl names ghost.json relative to varnishd's work dir.
	f.WorkDir = workDir
	f.GhostJSONPath = workDir + "/" + mainvcl.GhostJSON
	if s.mode == modeSidecar {
		// varnishd runs in the varnish container (varnishdArgs).
		f.Mode = gwruntime.ModeSidecar
		f.SecretFile = secretDir + "/" + secretKey
	} else {
		f.Ports = []int{}
		for _, p := range s.ports {
			if !slices.Contains(s.tlsPorts, p) {
				f.Ports = append(f.Ports, int(p))
			}
		}
		f.Storage = []string{s.class.storage}
		for _, k := range slices.Sorted(maps.Keys(s.class.params)) {
			f.Params = append(f.Params, k+"="+s.class.params[k])
		}
	}
	// hitch runs in the chaperone container, in both modes; its directory
	// is the TLS volume, mounted at the default --tls-dir.
	for _, p := range s.tlsPorts {
		f.TLSPorts = append(f.TLSPorts, int(p))
	}
	f.HTTP2 = !s.noHTTP2
	f.ProxyProtocol = s.proxyProtocol
	// varnishncsa runs in the chaperone container, in both modes.
	f.AccessLog = s.class.accessLog
	f.ExternalNameServices = s.class.externalNames
	f.LogLevel = s.class.logLevel
	f.DrainTimeout = time.Duration(s.drainTimeout) * time.Second
	f.HealthAddr = fmt.Sprintf(":%d", healthPort)
	if s.invalidatePort != 0 {
		f.InvalidateAddr = fmt.Sprintf(":%d", s.invalidatePort)
	}
	return f
}

// chaperoneArgs are the chaperone's command line: the flags that differ
// from the chaperone's defaults, and those the pod spec depends on (the
// work dir its volume is mounted on, the health port of the probes, the
// drain timeout within the grace period, varnishd's listeners and storage
// in supervise mode). TestChaperoneArgs pins them byte for byte: a
// change rolls every gateway on the provider's upgrade.
func (s *runtimeSpec) chaperoneArgs() []string {
	always := []string{"workdir", "log-level", "drain-timeout", "health-addr"}
	if s.mode != modeSidecar {
		// What the chaperone gives varnishd, even when it is its default
		// (malloc,256m), so that a new default rolls no gateway.
		always = append(always, "listen", "storage")
	}
	return s.chaperoneFlags().Args(always...)
}

// varnishdArgs is the command line of varnishd in the varnish container
// of sidecar mode: the sockets, admin connection, secret and boot VCL the
// chaperone expects (design/chaperone.md, "sidecar").
func (s *runtimeSpec) varnishdArgs() []string {
	cfg := varnishd.Config{WorkDir: workDir, GhostAdminAddr: ghostAdminAddr, Storage: []string{s.class.storage}}
	for _, p := range s.ports {
		if slices.Contains(s.tlsPorts, p) {
			// hitch (in the chaperone container) hands the connections
			// of an HTTPS port to this Unix socket, with a PROXY header.
			cfg.Listeners = append(cfg.Listeners, varnishd.TLSListener(gwruntime.DefaultChaperoneFlags().TLSDir, int(p)))
			continue
		}
		// With proxy_protocol the load balancer's PROXY header comes first
		// on every connection (the chaperone does the same in supervise
		// mode).
		cfg.Listeners = append(cfg.Listeners, varnishd.Listener{Name: routing.SocketName(gatewayv1.PortNumber(p)), Addr: fmt.Sprintf(":%d", p), Proxy: s.proxyProtocol})
	}
	for _, k := range slices.Sorted(maps.Keys(s.class.params)) {
		cfg.Params = append(cfg.Params, k+"="+s.class.params[k])
	}
	// The gateway's varnishd defaults, as the chaperone passes them in
	// supervise mode; a class parameter of the same name replaces one.
	cfg.Params = varnishd.WithDefaults(cfg.Params)
	if len(s.tlsPorts) > 0 && !s.noHTTP2 {
		cfg.Params = append(cfg.Params, "feature=+http2")
	}
	return varnishd.Args(cfg, adminAddr, secretDir+"/"+secretKey, bootDir+"/"+bootVCLKey)
}

// gatewayRules are the rules of the pods' Role in the Gateway's
// namespace: gwruntime.GatewayRules, reading exactly the certificate
// Secrets of the HTTPS listeners there (none without HTTPS listeners, so
// the Role of an HTTP gateway is unchanged), and, with the invalidation
// endpoint, gwruntime.InvalidateEndpointRules.
func (s *runtimeSpec) gatewayRules() []rbacv1.PolicyRule {
	rules := append(gwruntime.GatewayRules(s.gw), gwruntime.CertificateRules(s.certSecretNames()[s.gw.Namespace], false)...)
	if s.invalidatePort != 0 {
		rules = append(rules, gwruntime.InvalidateEndpointRules()...)
	}
	return rules
}

// certSecretNames are the names of the certificate Secrets by namespace.
func (s *runtimeSpec) certSecretNames() map[string][]string {
	out := map[string][]string{}
	for _, r := range s.certSecrets {
		out[r.Namespace] = append(out[r.Namespace], r.Name)
	}
	return out
}

// adminSecretName is the Secret that holds the varnishd admin secret
// shared by the two containers of sidecar mode.
func adminSecretName(gw routing.ObjectRef) string { return gwruntime.Name(gw) + "-admin" }

// startHash is the sha256 of what the pods are started with: the image and
// its pull policy, the mode, the command line (ports, storage, parameters,
// log level, drain timeout), the pod settings and the infrastructure's
// labels and annotations. Not the VCL, which the chaperone hot-reloads.
func (s *runtimeSpec) startHash() string {
	var varnishdArgs []string
	if s.mode == modeSidecar {
		varnishdArgs = s.varnishdArgs()
	}
	b, _ := json.Marshal(struct {
		Image, PullPolicy, Mode string
		Args, VarnishdArgs      []string
		Pod                     podSettings
		Infra                   infraSettings
		// Without sysctls the hash is what it was before the attribute.
		Sysctls map[string]string `json:",omitempty"`
	}{s.class.image, s.class.pullPolicy, s.mode, s.chaperoneArgs(), varnishdArgs, s.pod, s.infra, s.sysctls})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// mainVCL is the gateway's rendered main.vcl.
func (s *runtimeSpec) mainVCL() string {
	return mainvcl.Render(mainvcl.Options{ClassVCL: s.class.vcl, GatewayVCL: deref(s.gatewayVCL), ProxySources: s.proxySources})
}

// mainVCLHash is the SHA-256 of mainVCL, hex encoded (gwruntime.VCLDigest).
func (s *runtimeSpec) mainVCLHash() string { return gwruntime.VCLDigest(s.mainVCL()) }

func policyRulesApply(rules []rbacv1.PolicyRule) []*rbacv1apply.PolicyRuleApplyConfiguration {
	out := make([]*rbacv1apply.PolicyRuleApplyConfiguration, len(rules))
	for i, r := range rules {
		out[i] = rbacv1apply.PolicyRule().WithAPIGroups(r.APIGroups...).WithResources(r.Resources...).WithVerbs(r.Verbs...)
		if len(r.ResourceNames) > 0 {
			out[i].WithResourceNames(r.ResourceNames...)
		}
	}
	return out
}

// runtimeDrift compares the runtime objects in the cluster with s and
// says what differs: a missing object, changed RBAC rules, missing labels
// or annotations, a Deployment that the provider's apply would change (dry
// is its dry run, dryRunDeployment), or changed Service ports. Empty when the
// runtime is intact.
func (c *clients) runtimeDrift(ctx context.Context, s *runtimeSpec, dry *appsv1.Deployment) (string, error) {
	ns, name := s.gw.Namespace, s.name()
	lbl, ann := s.objectLabels(), s.objectAnnotations()
	missing := func(what string, err error) (string, error) {
		if apierrors.IsNotFound(err) {
			return what + " is missing", nil
		}
		return "", fmt.Errorf("get %s: %w", what, err)
	}
	relabelled := func(what string, o metav1.Object) string {
		if !hasMetadata(o, lbl, ann) {
			return "the labels or annotations of " + what + " changed"
		}
		return ""
	}
	sa, err := c.kube.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return missing("ServiceAccount "+ns+"/"+name, err)
	}
	if d := relabelled("ServiceAccount "+ns+"/"+name, sa); d != "" {
		return d, nil
	}
	role, err := c.kube.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return missing("Role "+ns+"/"+name, err)
	}
	if !equality.Semantic.DeepEqual(role.Rules, s.gatewayRules()) {
		return "the rules of Role " + ns + "/" + name + " changed", nil
	}
	if d := relabelled("Role "+ns+"/"+name, role); d != "" {
		return d, nil
	}
	rb, err := c.kube.RbacV1().RoleBindings(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return missing("RoleBinding "+ns+"/"+name, err)
	}
	if rb.RoleRef.Name != name || len(rb.Subjects) != 1 || rb.Subjects[0].Name != name || rb.Subjects[0].Namespace != ns {
		return "RoleBinding " + ns + "/" + name + " changed", nil
	}
	if d := relabelled("RoleBinding "+ns+"/"+name, rb); d != "" {
		return d, nil
	}
	cr, err := c.kube.RbacV1().ClusterRoles().Get(ctx, gwruntime.BackendClusterRoleName(s.gw), metav1.GetOptions{})
	if err != nil {
		return missing("ClusterRole "+gwruntime.BackendClusterRoleName(s.gw), err)
	}
	if !equality.Semantic.DeepEqual(cr.Rules, gwruntime.BackendRules()) {
		return "the rules of ClusterRole " + cr.Name + " changed", nil
	}
	if d := relabelled("ClusterRole "+cr.Name, cr); d != "" {
		return d, nil
	}
	d, err := c.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return missing("Deployment "+ns+"/"+name, err)
	}
	if diff := deploymentDrift(d, dry); diff != "" {
		return "the Deployment " + ns + "/" + name + " differs from what the provider writes in " + diff, nil
	}
	svc, err := c.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return missing("Service "+ns+"/"+name, err)
	}
	var ports []int32
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Port)
	}
	if !slices.Equal(ports, s.ports) || !equality.Semantic.DeepEqual(svc.Spec.Selector, gwruntime.Labels(s.gw)) {
		return "the ports or selector of Service " + ns + "/" + name + " changed", nil
	}
	if d := relabelled("Service "+ns+"/"+name, svc); d != "" {
		return d, nil
	}
	others := s.certSecretNames()
	delete(others, ns)
	for _, other := range slices.Sorted(maps.Keys(others)) {
		what := "Role " + other + "/" + gwruntime.CertificateRoleName(s.gw)
		r, err := c.kube.RbacV1().Roles(other).Get(ctx, gwruntime.CertificateRoleName(s.gw), metav1.GetOptions{})
		if err != nil {
			return missing(what, err)
		}
		if !equality.Semantic.DeepEqual(r.Rules, gwruntime.CertificateRules(others[other], true)) {
			return "the rules of " + what + " changed", nil
		}
		if _, err := c.kube.RbacV1().RoleBindings(other).Get(ctx, gwruntime.CertificateRoleName(s.gw), metav1.GetOptions{}); err != nil {
			return missing("RoleBinding "+other+"/"+gwruntime.CertificateRoleName(s.gw), err)
		}
	}
	lsets := s.listenerSetNames()
	for _, other := range slices.Sorted(maps.Keys(lsets)) {
		roleName := gwruntime.ListenerSetStatusRoleName(s.gw)
		what := "Role " + other + "/" + roleName
		r, err := c.kube.RbacV1().Roles(other).Get(ctx, roleName, metav1.GetOptions{})
		if err != nil {
			return missing(what, err)
		}
		if !equality.Semantic.DeepEqual(r.Rules, gwruntime.ListenerSetStatusRules(lsets[other])) {
			return "the rules of " + what + " changed", nil
		}
		if _, err := c.kube.RbacV1().RoleBindings(other).Get(ctx, roleName, metav1.GetOptions{}); err != nil {
			return missing("RoleBinding "+other+"/"+roleName, err)
		}
	}
	if d, err := c.invalidateAuthBindingDrift(ctx, s); d != "" || err != nil {
		return d, err
	}
	if s.mode == modeSidecar {
		sec, err := c.kube.CoreV1().Secrets(ns).Get(ctx, adminSecretName(s.gw), metav1.GetOptions{})
		if err != nil {
			return missing("Secret "+ns+"/"+adminSecretName(s.gw), err)
		}
		if d := relabelled("Secret "+ns+"/"+sec.Name, sec); d != "" {
			return d, nil
		}
	}
	return "", nil
}

// dryRunDeployment is the gateway's Deployment as the API server would
// store it after the provider's apply (a server-side dry run): defaults
// set, and other field managers' fields kept. An invalid pod template is
// an error the API server words, naming the field.
func (c *clients) dryRunDeployment(ctx context.Context, s *runtimeSpec) (*appsv1.Deployment, error) {
	opts := applyOptions()
	opts.DryRun = []string{metav1.DryRunAll}
	d, err := c.kube.AppsV1().Deployments(s.gw.Namespace).Apply(ctx, s.deployment(), opts)
	if err != nil {
		return nil, fmt.Errorf("dry run of the Deployment %s/%s: %w", s.gw.Namespace, s.name(), err)
	}
	return d, nil
}

// gatewayOwner is the owner reference of a gateway's namespaced runtime
// objects to its Gateway, so that Kubernetes' garbage collector deletes
// them with the Gateway. BlockOwnerDeletion is left unset: it would ask
// for the right to update gateways/finalizers, and the provider's destroy
// deletes the runtime itself anyway.
func gatewayOwner(gw *gatewayv1.Gateway) *metav1apply.OwnerReferenceApplyConfiguration {
	return metav1apply.OwnerReference().
		WithAPIVersion(gatewayv1.GroupVersion.String()).
		WithKind("Gateway").
		WithName(gw.Name).
		WithUID(gw.UID).
		WithController(true)
}

// applyRuntime writes the gateway's runtime: ServiceAccount, RBAC (with the
// invalidation endpoint's ClusterRoleBinding, or without it), the VCL
// ConfigMap, Service, Deployment and PodDisruptionBudget. The namespaced
// objects are owned by gw, the Gateway as stored (gatewayOwner); the
// backends' ClusterRole cannot be (a namespaced object cannot own a
// cluster-scoped one), and deleteRuntime deletes it.
func (c *clients) applyRuntime(ctx context.Context, s *runtimeSpec, gw *gatewayv1.Gateway) error {
	ns, name := s.gw.Namespace, s.name()
	lbl, ann := s.objectLabels(), s.objectAnnotations()
	opts := applyOptions()
	owner := gatewayOwner(gw)

	if _, err := c.kube.CoreV1().ServiceAccounts(ns).Apply(ctx,
		corev1apply.ServiceAccount(name, ns).WithLabels(lbl).WithAnnotations(ann).WithOwnerReferences(owner).WithAutomountServiceAccountToken(true), opts); err != nil {
		return fmt.Errorf("apply ServiceAccount %s/%s: %w", ns, name, err)
	}
	if err := c.applyGatewayRole(ctx, s, owner); err != nil {
		return err
	}
	rb := rbacv1apply.RoleBinding(name, ns).WithLabels(lbl).WithAnnotations(ann).WithOwnerReferences(owner).
		WithRoleRef(rbacv1apply.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("Role").WithName(name)).
		WithSubjects(rbacv1apply.Subject().WithKind("ServiceAccount").WithName(name).WithNamespace(ns))
	if _, err := c.kube.RbacV1().RoleBindings(ns).Apply(ctx, rb, opts); err != nil {
		return fmt.Errorf("apply RoleBinding %s/%s: %w", ns, name, err)
	}
	cr := rbacv1apply.ClusterRole(gwruntime.BackendClusterRoleName(s.gw)).WithLabels(lbl).WithAnnotations(ann).WithRules(policyRulesApply(gwruntime.BackendRules())...)
	if _, err := c.kube.RbacV1().ClusterRoles().Apply(ctx, cr, opts); err != nil {
		return fmt.Errorf("apply ClusterRole %s: %w", gwruntime.BackendClusterRoleName(s.gw), err)
	}

	if err := c.applyCertificateRoles(ctx, s); err != nil {
		return err
	}
	if err := c.applyListenerSetStatusRoles(ctx, s); err != nil {
		return err
	}
	if err := c.applyInvalidateAuthBinding(ctx, s); err != nil {
		return err
	}

	// The digest first: the pods load only the main.vcl it names.
	if err := c.recordVCLDigest(ctx, gw, s.mainVCLHash()); err != nil {
		return err
	}
	data := map[string]string{gwruntime.VCLDataKey: s.mainVCL(), bootVCLKey: varnishd.BootVCL}
	if s.gatewayVCL != nil {
		data[gatewayVCLKey] = *s.gatewayVCL
	}
	vclName := gwruntime.VCLConfigMapName(s.gw)
	if _, err := c.kube.CoreV1().ConfigMaps(ns).Apply(ctx, corev1apply.ConfigMap(vclName, ns).WithLabels(lbl).WithAnnotations(ann).WithOwnerReferences(owner).WithData(data), opts); err != nil {
		return fmt.Errorf("apply the VCL ConfigMap %s/%s: %w", ns, vclName, err)
	}

	svc := corev1apply.ServiceSpec().WithType(s.serviceType).WithSelector(gwruntime.Labels(s.gw))
	if s.externalTrafficPolicy != "" {
		svc.WithExternalTrafficPolicy(s.externalTrafficPolicy)
	}
	for _, p := range s.ports {
		svc.WithPorts(corev1apply.ServicePort().WithName(routing.SocketName(gatewayv1.PortNumber(p))).
			WithProtocol(corev1.ProtocolTCP).WithPort(p).WithTargetPort(intstr.FromInt32(p)))
	}
	svcAC := corev1apply.Service(name, ns).WithLabels(lbl).WithAnnotations(ann).WithAnnotations(s.annotations).WithOwnerReferences(owner).WithSpec(svc)
	if _, err := c.kube.CoreV1().Services(ns).Apply(ctx, svcAC, opts); err != nil {
		return fmt.Errorf("apply Service %s/%s: %w", ns, name, err)
	}

	if err := c.ensureAdminSecret(ctx, s, owner); err != nil {
		return err
	}
	if _, err := c.kube.AppsV1().Deployments(ns).Apply(ctx, s.deployment().WithOwnerReferences(owner), opts); err != nil {
		return fmt.Errorf("apply Deployment %s/%s: %w", ns, name, err)
	}

	pdb := policyv1apply.PodDisruptionBudget(name, ns).WithLabels(lbl).WithAnnotations(ann).WithOwnerReferences(owner).WithSpec(policyv1apply.PodDisruptionBudgetSpec().
		WithMaxUnavailable(s.maxUnavail).
		WithSelector(metav1apply.LabelSelector().WithMatchLabels(gwruntime.Labels(s.gw))))
	if _, err := c.kube.PolicyV1().PodDisruptionBudgets(ns).Apply(ctx, pdb, opts); err != nil {
		return fmt.Errorf("apply PodDisruptionBudget %s/%s: %w", ns, name, err)
	}
	return nil
}

// vclDigestFieldManager owns the Gateway's gwruntime.VCLDigestAnnotation,
// apart from the Gateway's spec, which the provider's apply of the spec
// would otherwise have to carry.
const vclDigestFieldManager = status.VCLDigestManager

// recordVCLDigest writes the digest of the main.vcl the provider rendered
// as the Gateway's gwruntime.VCLDigestAnnotation, unless gw (as stored)
// has it already.
func (c *clients) recordVCLDigest(ctx context.Context, gw *gatewayv1.Gateway, digest string) error {
	if gw.Annotations[gwruntime.VCLDigestAnnotation] == digest {
		return nil
	}
	ac := gatewayv1apply.Gateway(gw.Name, gw.Namespace).WithAnnotations(map[string]string{gwruntime.VCLDigestAnnotation: digest})
	if _, err := c.gateway.GatewayV1().Gateways(gw.Namespace).Apply(ctx, ac, metav1.ApplyOptions{FieldManager: vclDigestFieldManager, Force: true}); err != nil {
		return fmt.Errorf("record the main VCL's digest on Gateway %s/%s (annotation %s): %w", gw.Namespace, gw.Name, gwruntime.VCLDigestAnnotation, err)
	}
	return nil
}

// applyGatewayRole applies the pods' Role in the Gateway's namespace
// (gatewayRules).
func (c *clients) applyGatewayRole(ctx context.Context, s *runtimeSpec, owner *metav1apply.OwnerReferenceApplyConfiguration) error {
	ns, name := s.gw.Namespace, s.name()
	role := rbacv1apply.Role(name, ns).WithLabels(s.objectLabels()).WithAnnotations(s.objectAnnotations()).WithOwnerReferences(owner).WithRules(policyRulesApply(s.gatewayRules())...)
	if _, err := c.kube.RbacV1().Roles(ns).Apply(ctx, role, applyOptions()); err != nil {
		return fmt.Errorf("apply Role %s/%s: %w", ns, name, err)
	}
	return nil
}

// applyCertificateAccess applies what lets the pods read exactly the
// certificate Secrets of s: the Role in the Gateway's namespace and the
// certificate Roles elsewhere (applyCertificateRoles), and patch the
// status of exactly the ListenerSets whose HTTPS listeners they serve
// (applyListenerSetStatusRoles). applyRuntime does it too; this is for a
// change that does not roll the pods.
func (c *clients) applyCertificateAccess(ctx context.Context, s *runtimeSpec, gw *gatewayv1.Gateway) error {
	if err := c.applyGatewayRole(ctx, s, gatewayOwner(gw)); err != nil {
		return err
	}
	if err := c.applyCertificateRoles(ctx, s); err != nil {
		return err
	}
	return c.applyListenerSetStatusRoles(ctx, s)
}

// listenerSetNames are the names of s's ListenerSets by namespace.
func (s *runtimeSpec) listenerSetNames() map[string][]string {
	out := map[string][]string{}
	for _, r := range s.listenerSets {
		out[r.Namespace] = append(out[r.Namespace], r.Name)
	}
	return out
}

// applyListenerSetStatusRoles writes, in each namespace that holds
// ListenerSets with an HTTPS listener the pods serve (the Gateway's own
// included), a Role and RoleBinding gwruntime.ListenerSetStatusRoleName
// that let the pods read and patch the status of exactly those
// ListenerSets (gwruntime.ListenerSetStatusRules), and deletes those of
// namespaces that have none any more. Like the certificate Roles they
// carry the gateway's runtime labels, by which they are found.
func (c *clients) applyListenerSetStatusRoles(ctx context.Context, s *runtimeSpec) error {
	name, sa := gwruntime.ListenerSetStatusRoleName(s.gw), s.name()
	lbl, ann := s.objectLabels(), s.objectAnnotations()
	opts := applyOptions()
	want := s.listenerSetNames()
	for _, ns := range slices.Sorted(maps.Keys(want)) {
		role := rbacv1apply.Role(name, ns).WithLabels(lbl).WithAnnotations(ann).WithRules(policyRulesApply(gwruntime.ListenerSetStatusRules(want[ns]))...)
		if _, err := c.kube.RbacV1().Roles(ns).Apply(ctx, role, opts); err != nil {
			return fmt.Errorf("apply Role %s/%s, which lets the gateway pods keep the ResolvedRefs condition of the ListenerSets' HTTPS listeners current: %w", ns, name, err)
		}
		rb := rbacv1apply.RoleBinding(name, ns).WithLabels(lbl).WithAnnotations(ann).
			WithRoleRef(rbacv1apply.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(name)).
			WithSubjects(rbacv1apply.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(sa).WithNamespace(s.gw.Namespace))
		if _, err := c.kube.RbacV1().RoleBindings(ns).Apply(ctx, rb, opts); err != nil {
			return fmt.Errorf("apply RoleBinding %s/%s: %w", ns, name, err)
		}
	}
	return c.deleteGatewayRoles(ctx, s.gw, func(n, ns string) bool { _, ok := want[ns]; return n == name && !ok })
}

// applyCertificateRoles writes, in each other namespace than the
// Gateway's that holds certificate Secrets its HTTPS listeners reference,
// a Role and RoleBinding gwruntime.CertificateRoleName that let the pods
// read exactly those Secrets (and the ReferenceGrants there, which decide
// whether they may use them), and deletes those of namespaces no listener
// references any more. A namespaced object cannot be owned by an object
// of another namespace: they carry the gateway's runtime labels instead,
// by which they are found and deleted.
func (c *clients) applyCertificateRoles(ctx context.Context, s *runtimeSpec) error {
	name, sa := gwruntime.CertificateRoleName(s.gw), s.name()
	lbl, ann := s.objectLabels(), s.objectAnnotations()
	opts := applyOptions()
	want := s.certSecretNames()
	delete(want, s.gw.Namespace)
	for _, ns := range slices.Sorted(maps.Keys(want)) {
		role := rbacv1apply.Role(name, ns).WithLabels(lbl).WithAnnotations(ann).WithRules(policyRulesApply(gwruntime.CertificateRules(want[ns], true))...)
		if _, err := c.kube.RbacV1().Roles(ns).Apply(ctx, role, opts); err != nil {
			hint := ""
			if apierrors.IsForbidden(err) {
				hint = fmt.Sprintf("; the provider needs the ClusterRole %s bound in namespace %s too (docs/guides/security.md)", ProviderNamespaceRoleName, ns)
			}
			return fmt.Errorf("apply Role %s/%s, which lets the gateway pods read their certificate Secrets there: %w%s", ns, name, err, hint)
		}
		rb := rbacv1apply.RoleBinding(name, ns).WithLabels(lbl).WithAnnotations(ann).
			WithRoleRef(rbacv1apply.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(name)).
			WithSubjects(rbacv1apply.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(sa).WithNamespace(s.gw.Namespace))
		if _, err := c.kube.RbacV1().RoleBindings(ns).Apply(ctx, rb, opts); err != nil {
			return fmt.Errorf("apply RoleBinding %s/%s: %w", ns, name, err)
		}
	}
	return c.deleteCertificateRoles(ctx, s.gw, want)
}

// deleteCertificateRoles deletes the gateway's certificate Roles and
// RoleBindings (applyCertificateRoles) in the namespaces not in keep.
func (c *clients) deleteCertificateRoles(ctx context.Context, gw routing.ObjectRef, keep map[string][]string) error {
	current := gwruntime.CertificateRoleName(gw)
	return c.deleteGatewayRoles(ctx, gw, func(name, ns string) bool {
		if ns == gw.Namespace {
			return false // there, the gateway's own Role grants the Secrets
		}
		_, kept := keep[ns]
		return name == current && !kept
	})
}

// deleteGatewayRoles deletes the gateway's Roles and RoleBindings, found
// by the gateway's runtime labels, whose name and namespace drop accepts.
func (c *clients) deleteGatewayRoles(ctx context.Context, gw routing.ObjectRef, drop func(name, ns string) bool) error {
	sel := metav1.FormatLabelSelector(metav1.SetAsLabelSelector(runtimeLabels(gw)))
	rbs, err := c.kube.RbacV1().RoleBindings(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list the RoleBindings of gateway %s: %w", gw, err)
	}
	for _, rb := range rbs.Items {
		name := rb.Name
		if !drop(name, rb.Namespace) {
			continue
		}
		if err := c.kube.RbacV1().RoleBindings(rb.Namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &rb.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete RoleBinding %s/%s: %w", rb.Namespace, name, err)
		}
		role, err := c.kube.RbacV1().Roles(rb.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("get Role %s/%s: %w", rb.Namespace, name, err)
		}
		if !hasMetadata(role, runtimeLabels(gw), nil) {
			continue // not ours
		}
		if err := c.kube.RbacV1().Roles(rb.Namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &role.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Role %s/%s: %w", rb.Namespace, name, err)
		}
	}
	return nil
}

// ensureAdminSecret creates, in sidecar mode, the Secret with the admin
// secret of varnishd (32 random bytes, hex encoded) unless it exists: it is
// not rewritten, so applies do not roll the pods. In supervise mode the
// chaperone makes a secret of its own and the Secret is not needed.
func (c *clients) ensureAdminSecret(ctx context.Context, s *runtimeSpec, owner *metav1apply.OwnerReferenceApplyConfiguration) error {
	ns, name := s.gw.Namespace, adminSecretName(s.gw)
	if s.mode != modeSidecar {
		old, err := c.kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || old.Labels[gwruntime.NamespaceLabel] != ns || old.Labels["app.kubernetes.io/managed-by"] != managedLabels["app.kubernetes.io/managed-by"] {
			return nil // none, or not ours
		}
		err = c.kube.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &old.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Secret %s/%s, which supervise mode does not use: %w", ns, name, err)
		}
		return nil
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return fmt.Errorf("make the varnishd admin secret: %w", err)
	}
	// Created once with the runtime labels, then its labels and annotations
	// are applied: an apply of the metadata alone leaves the data, which
	// the create wrote, alone, and drops infrastructure labels that are
	// gone.
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: runtimeLabels(s.gw)},
		Data:       map[string][]byte{secretKey: []byte(hex.EncodeToString(buf) + "\n")},
	}
	if _, err := c.kube.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{FieldManager: FieldManager}); apierrors.IsAlreadyExists(err) {
		old, err := c.kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get Secret %s/%s: %w", ns, name, err)
		}
		if old.Labels[gwruntime.NamespaceLabel] != ns || old.Labels["app.kubernetes.io/managed-by"] != managedLabels["app.kubernetes.io/managed-by"] {
			return nil // not ours: used as it is
		}
	} else if err != nil {
		return fmt.Errorf("create Secret %s/%s with the varnishd admin secret: %w", ns, name, err)
	}
	ac := corev1apply.Secret(name, ns).WithLabels(s.objectLabels()).WithAnnotations(s.objectAnnotations()).WithOwnerReferences(owner)
	if _, err := c.kube.CoreV1().Secrets(ns).Apply(ctx, ac, applyOptions()); err != nil {
		return fmt.Errorf("apply the labels and annotations of Secret %s/%s: %w", ns, name, err)
	}
	return nil
}

// hasMetadata reports whether o carries every label and annotation given.
func hasMetadata(o metav1.Object, labels, annotations map[string]string) bool {
	for k, v := range labels {
		if got, ok := o.GetLabels()[k]; !ok || got != v {
			return false
		}
	}
	for k, v := range annotations {
		if got, ok := o.GetAnnotations()[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// fieldEnv is an environment variable set from a field of the pod (the
// downward API).
func fieldEnv(name, fieldPath string) *corev1apply.EnvVarApplyConfiguration {
	return corev1apply.EnvVar().WithName(name).WithValueFrom(corev1apply.EnvVarSource().
		WithFieldRef(corev1apply.ObjectFieldSelector().WithFieldPath(fieldPath)))
}

// deployment is the gateway's Deployment. In supervise mode one chaperone
// container runs varnishd as its child; in sidecar mode a varnish
// container runs varnishd and the chaperone steers it through the admin
// connection, sharing the work dir (and ghost.json) and the admin secret.
func (s *runtimeSpec) deployment() *appsv1apply.DeploymentApplyConfiguration {
	name, ns := s.name(), s.gw.Namespace
	ctr := corev1apply.Container().
		WithName(chaperoneName).
		WithImage(s.class.image).
		WithArgs(s.chaperoneArgs()...).
		// The pod's name and UID name its GatewayPodReport and make the
		// Pod its owner (chaperone --pod-name, --pod-uid).
		WithEnv(fieldEnv("VARNISHGW_POD_NAME", "metadata.name"), fieldEnv("VARNISHGW_POD_UID", "metadata.uid")).
		WithVolumeMounts(corev1apply.VolumeMount().WithName(stateVolume).WithMountPath(stateDir)).
		WithReadinessProbe(corev1apply.Probe().WithHTTPGet(corev1apply.HTTPGetAction().
			WithPath("/readyz").WithPort(intstr.FromString(healthPortName))).WithPeriodSeconds(2).WithFailureThreshold(2)).
		WithLivenessProbe(corev1apply.Probe().WithHTTPGet(corev1apply.HTTPGetAction().
			WithPath("/healthz").WithPort(intstr.FromString(healthPortName))).WithInitialDelaySeconds(10).WithPeriodSeconds(10)).
		WithLifecycle(corev1apply.Lifecycle().WithPreStop(corev1apply.LifecycleHandler().
			WithSleep(corev1apply.SleepAction().WithSeconds(preStopSleep))))
	for _, p := range s.ports {
		ctr.WithPorts(corev1apply.ContainerPort().WithName(routing.SocketName(gatewayv1.PortNumber(p))).
			WithContainerPort(p).WithProtocol(corev1.ProtocolTCP))
	}
	ctr.WithPorts(corev1apply.ContainerPort().WithName(healthPortName).WithContainerPort(healthPort).WithProtocol(corev1.ProtocolTCP))
	if s.invalidatePort != 0 {
		ctr.WithPorts(corev1apply.ContainerPort().WithName(invalidatePortName).WithContainerPort(s.invalidatePort).WithProtocol(corev1.ProtocolTCP))
	}
	if len(s.requests) > 0 || len(s.limits) > 0 {
		rr := corev1apply.ResourceRequirements()
		if len(s.requests) > 0 {
			rr.WithRequests(s.requests)
		}
		if len(s.limits) > 0 {
			rr.WithLimits(s.limits)
		}
		ctr.WithResources(rr)
	}
	containers := []*corev1apply.ContainerApplyConfiguration{ctr}
	volumes := []*corev1apply.VolumeApplyConfiguration{
		corev1apply.Volume().WithName(stateVolume).WithEmptyDir(corev1apply.EmptyDirVolumeSource()),
	}
	var tlsMount *corev1apply.VolumeMountApplyConfiguration
	if len(s.tlsPorts) > 0 {
		tlsMount = corev1apply.VolumeMount().WithName(tlsVolume).WithMountPath(gwruntime.DefaultChaperoneFlags().TLSDir)
		ctr.WithVolumeMounts(tlsMount)
		volumes = append(volumes, corev1apply.Volume().WithName(tlsVolume).WithEmptyDir(corev1apply.EmptyDirVolumeSource().
			WithMedium(corev1.StorageMediumMemory).WithSizeLimit(resource.MustParse(tlsVolumeSize))))
	}
	if s.mode == modeSidecar {
		// The HTTP listener ports move to the varnish container; hitch,
		// which listens on the HTTPS ports, and the invalidation endpoint
		// stay in the chaperone's. The
		// chaperone keeps its preStop pause: its SIGTERM starts the drain too.
		var kept []corev1apply.ContainerPortApplyConfiguration
		for _, p := range ctr.Ports {
			if *p.Name == healthPortName || *p.Name == invalidatePortName || slices.Contains(s.tlsPorts, *p.ContainerPort) {
				kept = append(kept, p)
			}
		}
		ctr.Ports = kept
		ctr.Resources = nil
		secretMount := corev1apply.VolumeMount().WithName(secretVolume).WithMountPath(secretDir).WithReadOnly(true)
		ctr.WithVolumeMounts(secretMount)
		varnish := corev1apply.Container().
			WithName(varnishName).
			WithImage(s.class.image).
			WithCommand(varnishdBin).
			WithArgs(s.varnishdArgs()...).
			WithVolumeMounts(
				corev1apply.VolumeMount().WithName(stateVolume).WithMountPath(stateDir),
				secretMount,
				corev1apply.VolumeMount().WithName(bootVolume).WithMountPath(bootDir).WithReadOnly(true)).
			// preStop: after the same pause, the chaperone drains varnishd;
			// the hook returns once it is done. It talks to the chaperone
			// over its drain socket (mode 0600) on the shared state volume:
			// nothing reachable over the network can start a drain.
			WithLifecycle(corev1apply.Lifecycle().WithPreStop(corev1apply.LifecycleHandler().
				WithExec(corev1apply.ExecAction().WithCommand(chaperoneBin, "drain",
					"--socket="+gwruntime.DrainSocket, fmt.Sprintf("--delay=%ds", preStopSleep)))))
		if tlsMount != nil {
			// varnishd opens the TLS sockets hitch connects to.
			varnish.WithVolumeMounts(tlsMount)
		}
		for _, p := range s.ports {
			if slices.Contains(s.tlsPorts, p) {
				continue
			}
			varnish.WithPorts(corev1apply.ContainerPort().WithName(routing.SocketName(gatewayv1.PortNumber(p))).
				WithContainerPort(p).WithProtocol(corev1.ProtocolTCP))
		}
		if len(s.requests) > 0 || len(s.limits) > 0 {
			rr := corev1apply.ResourceRequirements()
			if len(s.requests) > 0 {
				rr.WithRequests(s.requests)
			}
			if len(s.limits) > 0 {
				rr.WithLimits(s.limits)
			}
			varnish.WithResources(rr)
		}
		containers = []*corev1apply.ContainerApplyConfiguration{varnish, ctr}
		volumes = append(volumes,
			corev1apply.Volume().WithName(secretVolume).WithSecret(corev1apply.SecretVolumeSource().
				WithSecretName(adminSecretName(s.gw)).WithDefaultMode(0o400)),
			corev1apply.Volume().WithName(bootVolume).WithConfigMap(corev1apply.ConfigMapVolumeSource().
				WithName(gwruntime.VCLConfigMapName(s.gw)).WithItems(corev1apply.KeyToPath().WithKey(bootVCLKey).WithPath(bootVCLKey))))
	}
	pod := corev1apply.PodTemplateSpec().
		WithLabels(gwruntime.Labels(s.gw)).
		WithAnnotations(map[string]string{StartHashAnnotation: s.startHash()}).
		WithSpec(corev1apply.PodSpec().
			WithServiceAccountName(name).
			WithAutomountServiceAccountToken(true).
			WithTerminationGracePeriodSeconds(s.drainTimeout + preStopSleep + graceAfterDrain).
			WithContainers(containers...).
			WithVolumes(volumes...))
	return s.withPodSettings(appsv1apply.Deployment(name, ns).WithLabels(runtimeLabels(s.gw)).WithSpec(appsv1apply.DeploymentSpec().
		WithReplicas(s.replicas).
		WithSelector(metav1apply.LabelSelector().WithMatchLabels(gwruntime.Labels(s.gw))).
		WithStrategy(appsv1apply.DeploymentStrategy().WithType(appsv1.RollingUpdateDeploymentStrategyType).
			WithRollingUpdate(appsv1apply.RollingUpdateDeployment().WithMaxUnavailable(intstr.FromInt32(0)).WithMaxSurge(intstr.FromInt32(1)))).
		WithTemplate(pod)))
}

// rolledOut reports whether d has rolled out its current template, as
// kubectl rollout status decides it.
func rolledOut(d *appsv1.Deployment) (bool, string) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return false, "the Deployment controller has not observed the latest spec"
	case st.UpdatedReplicas < want:
		return false, fmt.Sprintf("%d of %d replicas updated", st.UpdatedReplicas, want)
	case st.Replicas > st.UpdatedReplicas:
		return false, fmt.Sprintf("%d old replicas pending termination", st.Replicas-st.UpdatedReplicas)
	case st.AvailableReplicas < st.UpdatedReplicas:
		return false, fmt.Sprintf("%d of %d updated replicas available", st.AvailableReplicas, st.UpdatedReplicas)
	}
	return true, ""
}

// serviceAddresses are the Service's addresses: the LoadBalancer ingress
// IPs and hostnames, or else its cluster IPs.
func serviceAddresses(svc *corev1.Service) []gatewayv1.GatewayStatusAddress {
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

// attachedRoutes counts the accepted routes per listener of gw from its
// RoutingFragments (the ones the gateway pods accept); every listener of gw
// has an entry.
func (c *clients) attachedRoutes(ctx context.Context, gw *gatewayv1.Gateway) (map[string]int32, error) {
	frags, _, err := c.gatewayFragments(ctx, routing.ObjectRef{Namespace: gw.Namespace, Name: gw.Name})
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

// writeGatewayStatus sets the provider's part of the Gateway status with
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
func (c *clients) writeGatewayStatus(ctx context.Context, gw *gatewayv1.Gateway, svc *corev1.Service, invalidParams error) error {
	ns, name := gw.Namespace, gw.Name
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			if gw, err = c.gateway.GatewayV1().Gateways(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("read Gateway %s/%s: %w", ns, name, err)
			}
		}
		if gw, err = c.removeStaleListenerStatus(ctx, gw); err == nil {
			err = c.applyGatewayStatus(ctx, gw, svc, invalidParams)
		}
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

// removeStaleListenerStatus removes the status entries of listeners gw's
// spec no longer has, with a JSON patch that tests the resource version
// (a server-side apply could only drop the provider's own fields of such
// an entry: the gateway pods' attachedRoutes or ResolvedRefs would be left
// as an entry without its required fields, which the API server refuses).
func (c *clients) removeStaleListenerStatus(ctx context.Context, gw *gatewayv1.Gateway) (*gatewayv1.Gateway, error) {
	inSpec := map[gatewayv1.SectionName]bool{}
	for _, l := range gw.Spec.Listeners {
		inSpec[l.Name] = true
	}
	ops := []map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": gw.ResourceVersion}}
	for i := len(gw.Status.Listeners) - 1; i >= 0; i-- {
		if !inSpec[gw.Status.Listeners[i].Name] {
			ops = append(ops, map[string]any{"op": "remove", "path": fmt.Sprintf("/status/listeners/%d", i)})
		}
	}
	if len(ops) == 1 {
		return gw, nil
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encode the removal of old listener status of Gateway %s/%s: %w", gw.Namespace, gw.Name, err)
	}
	out, err := c.gateway.GatewayV1().Gateways(gw.Namespace).Patch(ctx, gw.Name, types.JSONPatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager}, "status")
	if err != nil {
		if apierrors.IsInvalid(err) && strings.Contains(err.Error(), "/metadata/resourceVersion") {
			// The resource version changed since the read: read again.
			return nil, apierrors.NewConflict(gatewayv1.Resource("gateways"), gw.Name, err)
		}
		return nil, fmt.Errorf("remove the status of removed listeners of Gateway %s/%s: %w", gw.Namespace, gw.Name, err)
	}
	return out, nil
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

func (c *clients) applyGatewayStatus(ctx context.Context, gw *gatewayv1.Gateway, svc *corev1.Service, invalidParams error) error {
	var attached map[string]int32
	accepted := metav1.Condition{Type: string(gatewayv1.GatewayConditionAccepted), Status: metav1.ConditionTrue,
		Reason: string(gatewayv1.GatewayReasonAccepted), Message: "Accepted by the varnishgw provider.", ObservedGeneration: gw.Generation}
	if invalidParams != nil {
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, string(gatewayv1.GatewayReasonInvalidParameters), invalidParams.Error()
	}
	st := gatewayv1apply.GatewayStatus().WithConditions(status.Condition(gw.Status.Conditions, accepted))
	if svc != nil {
		for _, a := range serviceAddresses(svc) {
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
				if attached, err = c.attachedRoutes(ctx, gw); err != nil {
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
				Reason: string(gatewayv1.ListenerReasonAccepted), Message: "Served on varnishd socket " + routing.SocketName(l.Port) + ".", ObservedGeneration: gw.Generation}))
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
		cg, err := c.composeGateway(ctx, gw, nil)
		if err != nil {
			return err
		}
		st.WithAttachedListenerSets(cg.AttachedListenerSets())
	}
	ac := gatewayv1apply.Gateway(gw.Name, gw.Namespace).WithResourceVersion(gw.ResourceVersion).WithStatus(st)
	if _, err := c.gateway.GatewayV1().Gateways(gw.Namespace).ApplyStatus(ctx, ac, applyOptions()); err != nil {
		if apierrors.IsConflict(err) {
			return err
		}
		return fmt.Errorf("set the status of Gateway %s/%s: %w", gw.Namespace, gw.Name, err)
	}
	return nil
}

// deleteRuntime deletes every object the gateway resource created, each
// only if it carries the gateway's runtime labels (never an object of the
// same name that someone else made).
func (c *clients) deleteRuntime(ctx context.Context, gw routing.ObjectRef) error {
	ns, name := gw.Namespace, gwruntime.Name(gw)
	want := runtimeLabels(gw)
	ours := func(o metav1.Object) bool {
		for k, v := range want {
			if o.GetLabels()[k] != v {
				return false
			}
		}
		return true
	}
	type target struct {
		what string
		get  func() (metav1.Object, error)
		del  func(metav1.DeleteOptions) error
	}
	targets := []target{
		{"Deployment " + ns + "/" + name,
			func() (metav1.Object, error) {
				return c.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			},
			func(o metav1.DeleteOptions) error { return c.kube.AppsV1().Deployments(ns).Delete(ctx, name, o) }},
		{"PodDisruptionBudget " + ns + "/" + name,
			func() (metav1.Object, error) {
				return c.kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
			},
			func(o metav1.DeleteOptions) error {
				return c.kube.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, name, o)
			}},
		{"Service " + ns + "/" + name,
			func() (metav1.Object, error) { return c.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}) },
			func(o metav1.DeleteOptions) error { return c.kube.CoreV1().Services(ns).Delete(ctx, name, o) }},
		{"ConfigMap " + ns + "/" + gwruntime.VCLConfigMapName(gw),
			func() (metav1.Object, error) {
				return c.kube.CoreV1().ConfigMaps(ns).Get(ctx, gwruntime.VCLConfigMapName(gw), metav1.GetOptions{})
			},
			func(o metav1.DeleteOptions) error {
				return c.kube.CoreV1().ConfigMaps(ns).Delete(ctx, gwruntime.VCLConfigMapName(gw), o)
			}},
		{"RoleBinding " + ns + "/" + name,
			func() (metav1.Object, error) {
				return c.kube.RbacV1().RoleBindings(ns).Get(ctx, name, metav1.GetOptions{})
			},
			func(o metav1.DeleteOptions) error { return c.kube.RbacV1().RoleBindings(ns).Delete(ctx, name, o) }},
		{"Role " + ns + "/" + name,
			func() (metav1.Object, error) { return c.kube.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{}) },
			func(o metav1.DeleteOptions) error { return c.kube.RbacV1().Roles(ns).Delete(ctx, name, o) }},
		{"ClusterRole " + gwruntime.BackendClusterRoleName(gw),
			func() (metav1.Object, error) {
				return c.kube.RbacV1().ClusterRoles().Get(ctx, gwruntime.BackendClusterRoleName(gw), metav1.GetOptions{})
			},
			func(o metav1.DeleteOptions) error {
				return c.kube.RbacV1().ClusterRoles().Delete(ctx, gwruntime.BackendClusterRoleName(gw), o)
			}},
		{"Secret " + ns + "/" + adminSecretName(gw),
			func() (metav1.Object, error) {
				return c.kube.CoreV1().Secrets(ns).Get(ctx, adminSecretName(gw), metav1.GetOptions{})
			},
			func(o metav1.DeleteOptions) error {
				return c.kube.CoreV1().Secrets(ns).Delete(ctx, adminSecretName(gw), o)
			}},
		{"ServiceAccount " + ns + "/" + name,
			func() (metav1.Object, error) {
				return c.kube.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
			},
			func(o metav1.DeleteOptions) error { return c.kube.CoreV1().ServiceAccounts(ns).Delete(ctx, name, o) }},
	}
	if err := c.deleteCertificateRoles(ctx, gw, nil); err != nil {
		return err
	}
	if err := c.deleteGatewayRoles(ctx, gw, func(n, _ string) bool { return n == gwruntime.ListenerSetStatusRoleName(gw) }); err != nil {
		return err
	}
	if err := c.deleteInvalidateAuthBinding(ctx, gw); err != nil {
		return err
	}
	for _, t := range targets {
		o, err := t.get()
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("get %s: %w", t.what, err)
		}
		if !ours(o) {
			continue
		}
		uid := o.GetUID()
		bg := metav1.DeletePropagationBackground
		if err := t.del(metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s: %w", t.what, err)
		}
	}
	return nil
}

// parseResources turns a map of resource names to quantities into a
// ResourceList, naming the attribute in errors.
func parseResources(attr string, m map[string]string) (corev1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := corev1.ResourceList{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		q, err := resource.ParseQuantity(m[k])
		if err != nil {
			return nil, fmt.Errorf("%s[%q] = %q is not a Kubernetes quantity (%v); use for example \"500m\" for CPU or \"256Mi\" for memory", attr, k, m[k], err)
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
