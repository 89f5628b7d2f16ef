package gwruntime

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/mainvcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
)

// The layout of a gateway pod.
const (
	// StartHashAnnotation on the pod template is a hash of what varnishd and
	// the chaperone read at start; VCL and routing are not part of it, so
	// only start-time changes roll the pods.
	StartHashAnnotation = "varnishgw.dev/start-hash"
	// GatewayVCLKey keeps the Gateway's own vcl attribute in the VCL
	// ConfigMap beside main.vcl, so that import and drift detection can
	// read it back.
	GatewayVCLKey      = "gateway.vcl"
	ChaperoneContainer = "chaperone"
	stateVolume        = "state"
	stateDir           = "/var/lib/varnishgw"
	HealthPort         = 9091
	healthPortName     = "health"
	// InvalidatePortName names the container port of the chaperone's
	// invalidation endpoint (invalidation_endpoint_port).
	InvalidatePortName = "invalidate"
	preStopSleep       = 5  // seconds for endpoints to drop the pod before the drain starts
	graceAfterDrain    = 30 // seconds of terminationGracePeriodSeconds beyond the drain timeout
	VarnishContainer   = "varnish"
	WorkDir            = stateDir + "/varnishd"
	secretVolume       = "admin-secret"
	secretDir          = "/etc/varnishgw/secret"
	SecretKey          = "secret"
	bootVolume         = "boot-vcl"
	bootDir            = "/etc/varnishgw/boot"
	BootVCLKey         = "boot.vcl"
	// SecretFile and BootVCLFile are the admin secret and the boot VCL
	// as the varnish container of sidecar mode mounts them.
	SecretFile     = secretDir + "/" + SecretKey
	BootVCLFile    = bootDir + "/" + BootVCLKey
	varnishdBin    = "/usr/sbin/varnishd"
	chaperoneBin   = "/usr/local/bin/chaperone" // in the gateway image, beside varnishd
	AdminAddr      = "127.0.0.1:6082"
	GhostAdminAddr = "127.0.0.1:6084"
	// TLSVolume holds hitch's configuration, the certificates and keys
	// (mode 0600) and varnishd's TLS sockets: memory-backed, so keys never
	// reach a node's disk, and mounted at the chaperone's default --tls-dir
	// (both containers in sidecar mode: varnishd opens the sockets).
	TLSVolume = "tls"
	// tlsVolumeSize bounds the memory the TLS volume may take: PEM files of
	// up to 64 certificates per listener, a configuration and sockets.
	tlsVolumeSize = "16Mi"
)

// The pod's identity and hardening. The gateway image has a user
// varnishgw with this uid and gid (its config User is "65532:65532"), and
// varnishd, run as a non-root user, uses no jail and needs no capability:
// see "Pod security" in docs/resources/gateway.md.
const (
	gatewayUID = 65532
	gatewayGID = 65532
	tmpVolume  = "tmp"
	// tmpDir is writable for the C compiler varnishd runs on VCL; the
	// root file system is read-only.
	tmpDir = "/tmp"
	// UnprivilegedPortSysctl lets the non-root varnishd bind listener ports
	// below 1024 without NET_BIND_SERVICE. It is namespaced (per pod network
	// namespace), on the kubelet's safe list, and allowed by the Pod
	// Security Standards from baseline on, so restricted namespaces admit it.
	UnprivilegedPortSysctl = "net.ipv4.ip_unprivileged_port_start"
	// podTemplateHashLabel is the label the Deployment controller puts on
	// a ReplicaSet and its pods: a hash of their pod template.
	podTemplateHashLabel = appsv1.DefaultDeploymentUniqueLabelKey
)

// PodSettings are what platform teams set on the gateway pods (the
// gateway's pod attribute).
type PodSettings struct {
	ImagePullSecrets  []string                          `json:",omitempty"`
	NodeSelector      map[string]string                 `json:",omitempty"`
	Tolerations       []corev1.Toleration               `json:",omitempty"`
	Affinity          *corev1.Affinity                  `json:",omitempty"`
	TopologySpread    []corev1.TopologySpreadConstraint `json:",omitempty"`
	PriorityClassName string                            `json:",omitempty"`
	Labels            map[string]string                 `json:",omitempty"`
	Annotations       map[string]string                 `json:",omitempty"`
}

// InfraSettings are the Gateway's spec.infrastructure: labels and
// annotations for every object generated for the Gateway, and a reference
// to a ConfigMap of gateway parameters.
type InfraSettings struct {
	Labels        map[string]string                   `json:",omitempty"`
	Annotations   map[string]string                   `json:",omitempty"`
	ParametersRef *gatewayv1.LocalParametersReference `json:"-"` // its content is in the class defaults
}

// ManagedByLabel and ManagedBy mark every object the provider creates.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "varnishgw"
)

// ManagedLabels are the labels of every object the provider creates.
func ManagedLabels() map[string]string { return map[string]string{ManagedByLabel: ManagedBy} }

// RuntimeLabels are the runtime objects' labels: Labels plus
// ManagedLabels.
func RuntimeLabels(gw object.Ref) map[string]string {
	l := Labels(gw)
	maps.Copy(l, ManagedLabels())
	return l
}

// Spec is everything a gateway's runtime objects are built from: the
// provider fills it from the gateway's configuration and its class, and
// renders the ServiceAccount, RBAC, VCL ConfigMap, Service, Deployment and
// PodDisruptionBudget from it.
type Spec struct {
	Gateway    object.Ref
	ClassName  string
	Class      *Class // with the gateway's parametersRef applied
	Pod        PodSettings
	Infra      InfraSettings
	GatewayVCL *string
	Ports      []int32 // distinct, sorted
	// TLSPorts are the ports of the HTTPS listeners (a subset of ports):
	// hitch terminates TLS on them and hands connections to varnishd's
	// Unix socket port-N in the TLS volume.
	TLSPorts []int32
	// NoHTTP2 turns HTTP/2 off on the HTTPS listeners (chaperone
	// --http2=false); the zero value is the chaperone's default, on.
	NoHTTP2 bool
	// ProxyProtocol makes every listener take the PROXY protocol from a
	// load balancer in front (chaperone --proxy-protocol): varnishd's HTTP
	// sockets expect it, and hitch passes it on on the HTTPS ports.
	ProxyProtocol bool
	// ProxySources are proxy_protocol_sources, sorted: main.vcl's ACL of
	// the peers whose PROXY header varnishd honours.
	ProxySources []netip.Prefix
	// InvalidatePort is the port of the chaperone's authenticated POST
	// /invalidate endpoint (invalidation_endpoint_port); 0: none.
	InvalidatePort int32
	// Sysctls are the sysctls attribute: set in the pods' security
	// context after the provider's own UnprivilegedPortSysctl, by name.
	Sysctls map[string]string
	// CertSecrets are the certificate Secrets the HTTPS listeners reference
	// (routing.CertificateSecrets): the pods may read exactly those.
	CertSecrets []object.Ref
	// ListenerSets are the ListenerSets with an HTTPS listener the pods
	// serve: the pods keep the ResolvedRefs condition of those listeners
	// current, and may patch the status of exactly these ListenerSets
	// (applyListenerSetStatusRoles).
	ListenerSets []object.Ref
	// ExternalTrafficPolicy is the Service's, empty: Kubernetes' default.
	ExternalTrafficPolicy corev1.ServiceExternalTrafficPolicy
	Replicas              int32
	Mode                  string
	DrainTimeout          int64 // seconds
	ServiceType           corev1.ServiceType
	ServiceAnnotations    map[string]string
	MaxUnavailable        intstr.IntOrString
	Requests              corev1.ResourceList
	Limits                corev1.ResourceList
	// SidecarVarnishd renders the command line of varnishd in the varnish
	// container of sidecar mode (package varnishd writes it, which the
	// core does not import); nil in supervise mode only.
	SidecarVarnishd func(*Spec) []string
	// BootVCL is varnishd's boot VCL (varnishd.BootVCL), which the VCL
	// ConfigMap carries for the varnish container of sidecar mode.
	BootVCL string
}

// Name names the gateway's runtime objects (Name of the Gateway).
func (s *Spec) Name() string { return Name(s.Gateway) }

// ObjectLabels are the labels of every object generated for the gateway:
// the runtime labels, the Gateway API's well-known labels (GEP-1762) and
// the Gateway's infrastructure labels.
func (s *Spec) ObjectLabels() map[string]string {
	l := RuntimeLabels(s.Gateway)
	l[gatewayv1.GatewayNameLabelKey] = s.Gateway.Name
	if s.ClassName != "" {
		l[gatewayv1.GatewayClassNameLabelKey] = s.ClassName
	}
	maps.Copy(l, s.Infra.Labels)
	return l
}

// ObjectAnnotations are the annotations of every object generated for the
// gateway: the Gateway's infrastructure annotations (nil when none).
func (s *Spec) ObjectAnnotations() map[string]string {
	if len(s.Infra.Annotations) == 0 {
		return nil
	}
	return maps.Clone(s.Infra.Annotations)
}

// podLabels are the labels of the gateway pods: the selector, the
// well-known and infrastructure labels, and pod.labels.
func (s *Spec) podLabels() map[string]string {
	l := s.ObjectLabels()
	maps.Copy(l, s.Pod.Labels)
	maps.Copy(l, Labels(s.Gateway))
	return l
}

// podAnnotations are the annotations of the gateway pods: the start hash,
// the infrastructure annotations and pod.annotations.
func (s *Spec) podAnnotations() map[string]string {
	a := map[string]string{}
	maps.Copy(a, s.Infra.Annotations)
	maps.Copy(a, s.Pod.Annotations)
	a[StartHashAnnotation] = s.StartHash()
	return a
}

// LowestPort is the lowest listener port, 0 without listeners.
func (s *Spec) LowestPort() int32 {
	if len(s.Ports) == 0 {
		return 0
	}
	return slices.Min(s.Ports)
}

// ChaperoneFlags are the chaperone's flags in a gateway pod (see
// design/chaperone.md).
func (s *Spec) ChaperoneFlags() ChaperoneFlags {
	f := DefaultChaperoneFlags()
	f.RoutingSource = RoutingKubernetes
	f.Gateway = s.Gateway.String()
	f.VCLPath = "" // from the Gateway's VCL ConfigMap
	// main.vcl names ghost.json relative to varnishd's work dir.
	f.WorkDir = WorkDir
	f.GhostJSONPath = WorkDir + "/" + mainvcl.GhostJSON
	if s.Mode == ModeSidecar {
		// varnishd runs in the varnish container (varnishdArgs).
		f.Mode = ModeSidecar
		f.SecretFile = secretDir + "/" + SecretKey
	} else {
		f.Ports = []int{}
		for _, p := range s.Ports {
			if !slices.Contains(s.TLSPorts, p) {
				f.Ports = append(f.Ports, int(p))
			}
		}
		f.Storage = []string{s.Class.Storage}
		for _, k := range slices.Sorted(maps.Keys(s.Class.Params)) {
			f.Params = append(f.Params, k+"="+s.Class.Params[k])
		}
	}
	// hitch runs in the chaperone container, in both modes; its directory
	// is the TLS volume, mounted at the default --tls-dir.
	for _, p := range s.TLSPorts {
		f.TLSPorts = append(f.TLSPorts, int(p))
	}
	f.HTTP2 = !s.NoHTTP2
	f.ProxyProtocol = s.ProxyProtocol
	// varnishncsa runs in the chaperone container, in both modes.
	f.AccessLog = s.Class.AccessLog
	f.ExternalNameServices = s.Class.ExternalNames
	f.LogLevel = s.Class.LogLevel
	f.DrainTimeout = time.Duration(s.DrainTimeout) * time.Second
	f.HealthAddr = fmt.Sprintf(":%d", HealthPort)
	if s.InvalidatePort != 0 {
		f.InvalidateAddr = fmt.Sprintf(":%d", s.InvalidatePort)
	}
	return f
}

// ChaperoneArgs are the chaperone's command line: the flags that differ
// from the chaperone's defaults, and those the pod spec depends on (the
// work dir its volume is mounted on, the health port of the probes, the
// drain timeout within the grace period, varnishd's listeners and storage
// in supervise mode). TestChaperoneArgs pins them byte for byte: a
// change rolls every gateway on the provider's upgrade.
func (s *Spec) ChaperoneArgs() []string {
	always := []string{"workdir", "log-level", "drain-timeout", "health-addr"}
	if s.Mode != ModeSidecar {
		// What the chaperone gives varnishd, even when it is its default
		// (malloc,256m), so that a new default rolls no gateway.
		always = append(always, "listen", "storage")
	}
	return s.ChaperoneFlags().Args(always...)
}

// varnishdArgs is the command line of varnishd in the varnish container
// of sidecar mode: the sockets, admin connection, secret and boot VCL the
// chaperone expects (design/chaperone.md, "sidecar").
func (s *Spec) varnishdArgs() []string {
	if s.SidecarVarnishd == nil {
		return nil
	}
	return s.SidecarVarnishd(s)
}

// GatewayRules are the rules of the pods' Role in the Gateway's
// namespace: the package's GatewayRules, reading exactly the certificate
// Secrets of the HTTPS listeners there (none without HTTPS listeners, so
// the Role of an HTTP gateway is unchanged), and, with the invalidation
// endpoint, InvalidateEndpointRules.
func (s *Spec) GatewayRules() []rbacv1.PolicyRule {
	rules := append(GatewayRules(s.Gateway), CertificateRules(s.CertificateSecretNames()[s.Gateway.Namespace], false)...)
	if s.InvalidatePort != 0 {
		rules = append(rules, InvalidateEndpointRules()...)
	}
	return rules
}

// CertificateSecretNames are the names of the certificate Secrets by namespace.
func (s *Spec) CertificateSecretNames() map[string][]string {
	out := map[string][]string{}
	for _, r := range s.CertSecrets {
		out[r.Namespace] = append(out[r.Namespace], r.Name)
	}
	return out
}

// ListenerSetNames are the names of s's ListenerSets by namespace.
func (s *Spec) ListenerSetNames() map[string][]string {
	out := map[string][]string{}
	for _, r := range s.ListenerSets {
		out[r.Namespace] = append(out[r.Namespace], r.Name)
	}
	return out
}

// AdminSecretName is the Secret that holds the varnishd admin secret
// shared by the two containers of sidecar mode.
func AdminSecretName(gw object.Ref) string { return Name(gw) + "-admin" }

// StartHash is the sha256 of what the pods are started with: the image and
// its pull policy, the mode, the command line (ports, storage, parameters,
// log level, drain timeout), the pod settings and the infrastructure's
// labels and annotations. Not the VCL, which the chaperone hot-reloads.
func (s *Spec) StartHash() string {
	var varnishdArgs []string
	if s.Mode == ModeSidecar {
		varnishdArgs = s.varnishdArgs()
	}
	b, _ := json.Marshal(struct {
		Image, PullPolicy, Mode string
		Args, VarnishdArgs      []string
		Pod                     PodSettings
		Infra                   InfraSettings
		// Without sysctls the hash is what it was before the attribute.
		Sysctls map[string]string `json:",omitempty"`
	}{s.Class.Image, s.Class.PullPolicy, s.Mode, s.ChaperoneArgs(), varnishdArgs, s.Pod, s.Infra, s.Sysctls})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// MainVCL is the gateway's rendered main.vcl.
func (s *Spec) MainVCL() string {
	return mainvcl.Render(mainvcl.Options{ClassVCL: s.Class.VCL, GatewayVCL: deref(s.GatewayVCL), ProxySources: s.ProxySources})
}

// MainVCLDigest is the SHA-256 of mainVCL, hex encoded (VCLDigest).
func (s *Spec) MainVCLDigest() string { return VCLDigest(s.MainVCL()) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
