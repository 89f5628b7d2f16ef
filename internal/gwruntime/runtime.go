package gwruntime

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

const (
	// VCLDataKey is the data key of main.vcl in the VCL ConfigMap.
	VCLDataKey = "main.vcl"
	// DrainSocket is the drain socket of a gateway pod: on the state volume
	// both containers mount, served by the chaperone (its --drain-socket in
	// sidecar mode) and reached by the varnish container's preStop hook
	// (`chaperone drain --socket=...`).
	DrainSocket = "/var/lib/varnishgw/drain.sock"
	// NamespaceLabel carries the Gateway's namespace on its runtime
	// objects (GatewayLabel carries its name).
	NamespaceLabel = "varnishgw.dev/gateway-namespace"
)

// Name names the ServiceAccount, Role, RoleBinding, Deployment,
// Service and PodDisruptionBudget of gw, all in gw's namespace:
// "varnishgw-<name>" when that is a valid DNS label (a Service name must
// be one), otherwise a readable prefix cut to fit plus a hash of the name.
func Name(gw object.Ref) string {
	if n := "varnishgw-" + gw.Name; len(validation.IsDNS1035Label(n)) == 0 {
		return n
	}
	return hashedName("vgw-", gw.Name, 63)
}

// VCLConfigMapName is the ConfigMap in gw's namespace that holds main.vcl
// (key VCLDataKey), which the chaperone watches and hot-reloads.
func VCLConfigMapName(gw object.Ref) string { return Name(gw) + "-vcl" }

// VCLDigestAnnotation is the Gateway annotation in which the provider
// records VCLDigest of the main.vcl it rendered. The chaperone loads a
// main.vcl from the VCL ConfigMap only when its digest is this one: VCL is
// code inside varnishd, and whoever may update ConfigMaps in the Gateway's
// namespace may not write the Gateway.
const VCLDigestAnnotation = "varnishgw.dev/main-vcl-sha256"

// VCLDigest is the SHA-256 of a main.vcl, hex encoded.
func VCLDigest(src string) string {
	sum := sha256.Sum256([]byte(src))
	return hex.EncodeToString(sum[:])
}

// BackendClusterRoleName is the ClusterRole that lets gw's chaperone read
// Services, EndpointSlices and ReferenceGrants:
// "varnishgw-backends-<namespace>.<name>", which no other gateway's
// namespace and name can give (a namespace has no dot), or, when that is
// too long, a readable prefix cut to fit plus a hash of namespace and
// name. It grants nothing by itself: each route binds it, with
// BackendRoleBindingName, in exactly the namespaces its backends live in.
func BackendClusterRoleName(gw object.Ref) string {
	return gatewayRoleName("varnishgw-backends-", gw)
}

// BackendRoleBindingName is the RoleBinding route writes in each namespace
// its backends live in, binding BackendClusterRoleName(gw) to gw's
// ServiceAccount there: "vgw-backends-" plus a readable
// gateway-namespace, gateway, route-namespace and route part, cut to fit,
// plus a hash of all four. One per (gateway, route): the binding lives in
// the backends' namespace, not the Gateway's, so two Gateways of one name
// in different namespaces must not share it.
func BackendRoleBindingName(gw, route object.Ref) string {
	return perRouteName("vgw-backends-", gw, route, gw.Namespace+"-"+gw.Name+"-"+route.Namespace+"-"+route.Name)
}

// Labels are the labels of gw's runtime objects; the Deployment's pod
// selector is this set.
func Labels(gw object.Ref) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":     "varnishgw",
		"app.kubernetes.io/instance": Name(gw),
		GatewayLabel:                 gatewayLabelValue(gw.Name),
		NamespaceLabel:               gw.Namespace,
	}
}

// hashedName is prefix + name when that is a valid DNS label of at most
// max characters; otherwise prefix, name lower-cased with every other
// character turned into '-', cut to fit, and 10 hex digits of name's hash.
func hashedName(prefix, name string, max int) string {
	if n := prefix + name; len(n) <= max && len(validation.IsDNS1123Label(n)) == 0 {
		return n
	}
	sum := sha256.Sum256([]byte(name))
	readable := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(name))
	if room := max - len(prefix) - 11; len(readable) > room {
		readable = readable[:room]
	}
	readable = strings.Trim(readable, "-")
	if readable != "" {
		readable += "-"
	}
	return prefix + readable + hex.EncodeToString(sum[:5])
}

// GatewayRules are the chaperone's rights in gw's namespace (the Role
// Name(gw)): read its own main.vcl ConfigMap (no other ConfigMap),
// read RoutingFragments, write its pod's GatewayPodReport, read its own
// Gateway, patch its own Gateway's status. design/routing-sync.md lists them.
func GatewayRules(gw object.Ref) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{VCLConfigMapName(gw)}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"varnishgw.dev"}, Resources: []string{"routingfragments"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"varnishgw.dev"}, Resources: []string{"gatewaypodreports"}, Verbs: []string{"get", "create", "patch"}},
		{APIGroups: []string{"varnishgw.dev"}, Resources: []string{"cacheinvalidations"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"gateways"}, ResourceNames: []string{gw.Name}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"gateways/status"}, ResourceNames: []string{gw.Name}, Verbs: []string{"get", "patch"}},
	}
}

// InvalidateEndpointRules are the further rights, in the Gateway's
// namespace, of pods that serve the POST /invalidate endpoint
// (--invalidate-addr): create the CacheInvalidations callers ask for (and
// delete them once applied), and list the pods and their reports to know
// which Ready pods must acknowledge and which did. With them the
// pods need AuthDelegatorClusterRole, bound cluster-wide, to check callers
// (TokenReview, SubjectAccessReview).
func InvalidateEndpointRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"varnishgw.dev"}, Resources: []string{"cacheinvalidations"}, Verbs: []string{"create", "delete"}},
		{APIGroups: []string{"varnishgw.dev"}, Resources: []string{"gatewaypodreports"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
	}
}

// InvalidateAuthBindingName is the ClusterRoleBinding that binds
// AuthDelegatorClusterRole to gw's ServiceAccount when its pods serve the
// invalidation endpoint: "varnishgw-invalidate-<namespace>.<name>", a DNS
// subdomain that no other gateway's name can give (a namespace has no dot),
// or, when that is too long, a readable prefix cut to fit plus a hash of
// namespace and name.
func InvalidateAuthBindingName(gw object.Ref) string {
	const prefix = "varnishgw-invalidate-"
	if n := prefix + gw.Namespace + "." + gw.Name; len(validation.IsDNS1123Subdomain(n)) == 0 {
		return n
	}
	return hashedName(prefix, gw.Namespace+"."+gw.Name, 253)
}

// AuthDelegatorClusterRole is Kubernetes' built-in ClusterRole that lets
// an identity create TokenReviews and SubjectAccessReviews: what the
// invalidation endpoint authenticates and authorizes its callers with.
const AuthDelegatorClusterRole = "system:auth-delegator"

// CertificateRoleName is the Role (and its RoleBinding) in another
// namespace than gw's that lets gw's chaperone read the certificate
// Secrets its HTTPS listeners (and its ListenerSets') reference there
// (CertificateRules): "varnishgw-certs-<namespace>.<name>", which no other
// gateway's namespace and name can give (a namespace has no dot), or, when
// that is too long, a readable prefix cut to fit plus a hash of namespace
// and name.
func CertificateRoleName(gw object.Ref) string { return gatewayRoleName("varnishgw-certs-", gw) }

// gatewayRoleName is prefix + "<namespace>.<name>" of gw (namespaces have
// no dots, so no two gateways share it), hashed to fit when too long.
func gatewayRoleName(prefix string, gw object.Ref) string {
	if n := prefix + gw.Namespace + "." + gw.Name; len(validation.IsDNS1123Subdomain(n)) == 0 {
		return n
	}
	return hashedName(prefix, gw.Namespace+"."+gw.Name, 253)
}

// CertificateRules are the chaperone's rights on the certificate Secrets
// of its HTTPS listeners in one namespace: get, list and watch of exactly
// the Secrets named (the chaperone watches each by name, with a field
// selector metadata.name=NAME, which RBAC checks against resourceNames),
// never any other Secret. In another namespace than the Gateway's
// (crossNamespace) also reading ReferenceGrants there, which decide
// whether the Gateway may use the Secrets. Nil when names is empty: a rule
// without resourceNames would grant every Secret.
func CertificateRules(names []string, crossNamespace bool) []rbacv1.PolicyRule {
	if len(names) == 0 {
		return nil
	}
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: slices.Clone(names), Verbs: []string{"get", "list", "watch"}},
	}
	if crossNamespace {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"referencegrants"}, Verbs: []string{"get", "list", "watch"}})
	}
	return rules
}

// BackendRules are the chaperone's rights in each namespace its routes'
// backends live in (the ClusterRole BackendClusterRoleName(gw), bound
// there by the routes): read Services, EndpointSlices and ReferenceGrants.
func BackendRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"referencegrants"}, Verbs: []string{"get", "list", "watch"}},
	}
}

// RouteStatusRules are the chaperone's rights on the routes it serves in
// one namespace (the Role RouteStatusRoleName there, which the provider
// keeps listing exactly those routes): read them and patch their status,
// to keep the ResolvedRefs condition of their parent entries for the
// Gateway true between applies. Exactly those routes (resourceNames): no
// other route's status, and no spec. Nil when routes is empty: a rule
// without resourceNames would grant every route of the namespace.
func RouteStatusRules(routes []string) []rbacv1.PolicyRule {
	if len(routes) == 0 {
		return nil
	}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"httproutes"}, ResourceNames: slices.Clone(routes), Verbs: []string{"get"}},
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"httproutes/status"}, ResourceNames: slices.Clone(routes), Verbs: []string{"patch"}},
	}
}

// RouteStatusRoleName is the Role (and its RoleBinding), in each
// namespace that holds routes gw serves, that gives gw's ServiceAccount
// RouteStatusRules on exactly those routes:
// "varnishgw-routes-<namespace>.<name>" of the Gateway, like
// ListenerSetStatusRoleName.
func RouteStatusRoleName(gw object.Ref) string {
	return gatewayRoleName("varnishgw-routes-", gw)
}

// perRouteName is prefix, readable lower-cased with every character that is
// not a letter, digit or '-' turned into '-' and cut to 200 characters,
// and 10 hex digits of the hash of gw's and route's namespaces and names:
// a valid DNS subdomain, distinct for every (gateway, route) pair.
func perRouteName(prefix string, gw, route object.Ref, readable string) string {
	sum := sha256.Sum256([]byte(gw.Namespace + "\x00" + gw.Name + "\x00" + route.Namespace + "\x00" + route.Name))
	readable = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(readable))
	if len(readable) > 200 {
		readable = readable[:200]
	}
	return prefix + strings.Trim(readable, "-") + "-" + hex.EncodeToString(sum[:5])
}

// ListenerSetStatusRoleName is the Role (and its RoleBinding), in each
// namespace that holds ListenerSets with an HTTPS listener gw serves,
// that gives gw's ServiceAccount ListenerSetStatusRules on exactly those
// ListenerSets.
func ListenerSetStatusRoleName(gw object.Ref) string {
	return gatewayRoleName("varnishgw-listenersets-", gw)
}

// ListenerSetStatusRules are the chaperone's rights on the ListenerSets of
// one namespace whose HTTPS listeners it serves: read them (the
// conditions there, whose lastTransitionTime it keeps) and patch their
// status, to keep the ResolvedRefs condition of those listeners current.
// Exactly the ListenerSets named (resourceNames): no other ListenerSet,
// and no spec. Nil when names is empty: a rule without resourceNames would
// grant every ListenerSet of the namespace.
func ListenerSetStatusRules(names []string) []rbacv1.PolicyRule {
	if len(names) == 0 {
		return nil
	}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"listenersets"}, ResourceNames: slices.Clone(names), Verbs: []string{"get"}},
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"listenersets/status"}, ResourceNames: slices.Clone(names), Verbs: []string{"patch"}},
	}
}
