package provider

import (
	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"
	rbacv1 "k8s.io/api/rbac/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// The least-privilege rights of the provider's own identity (the security
// guide prints them as two ClusterRoles, and e2e/cluster runs the whole
// lifecycle with exactly these rights and checks in the API server's audit
// log that each one is used):
//
//   - ProviderClusterRules, bound cluster-wide: the cluster-scoped objects
//     (CRDs, GatewayClasses, the gateways' backend ClusterRoles and the
//     ClusterRoleBindings of their invalidation endpoints), the
//     HTTPRoutes wherever they live, RoleBindings in the routes' backend
//     namespaces, Roles and RoleBindings in the routes' namespaces, and
//     reading what plan-time validation and attachment read
//     (Gateways, Services, EndpointSlices, ReferenceGrants, Namespaces);
//   - ProviderNamespaceRules, bound with a RoleBinding in each namespace
//     that holds Gateways (and in each class's parameters namespace): the
//     Gateways and their runtime objects, Secrets included.
//
// Kubernetes lets an identity grant only rights it holds itself, so the
// provider holds some rights only in order to grant them to the gateway
// pods (GrantOnly); it never uses them.
const (
	// ProviderClusterRoleName and ProviderNamespaceRoleName are the names
	// the security guide gives the two ClusterRoles.
	ProviderClusterRoleName   = control.ProviderClusterRoleName
	ProviderNamespaceRoleName = control.ProviderNamespaceRoleName
)

// ProviderClusterRules are the provider's cluster-wide rights.
func ProviderClusterRules() []rbacv1.PolicyRule {
	crds := []string{vgwapi.RoutingFragmentResource + "." + vgwapi.Group, vgwapi.GatewayPodReportResource + "." + vgwapi.Group,
		vgwapi.CacheInvalidationResource + "." + vgwapi.Group}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"create"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, ResourceNames: crds, Verbs: []string{"get", "patch"}},
		// Whether the HTTPRoute CRD has the experimental channel's fields
		// a route uses (gatewayapi_channel.go).
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, ResourceNames: []string{control.HTTPRouteCRD}, Verbs: []string{"get"}},
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"gatewayclasses"}, Verbs: []string{"get", "create", "patch", "delete"}},
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"gatewayclasses/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"gateways"}, Verbs: []string{"get"}},
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"httproutes"}, Verbs: []string{"get", "create", "patch", "delete"}},
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"httproutes/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"referencegrants"}, Verbs: []string{"get", "list", "watch"}},
		// ListenerSets (varnishgw_listener_set) may be in any namespace a
		// Gateway's allowedListeners admits; the provider lists those of a
		// Gateway to compose its listeners. It also grants the gateway's
		// pods get and status patch of exactly the ListenerSets whose
		// HTTPS listeners they serve (gwruntime.ListenerSetStatusRules),
		// rights it holds and uses itself.
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"listenersets"}, Verbs: []string{"get", "list", "create", "patch", "delete"}},
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"listenersets/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"get", "create", "patch", "delete"}},
		// Roles: the gateways' own and their certificate Roles, and in a
		// route's namespace the Role that lets each Gateway serving it
		// write its ResolvedRefs condition (on that route alone).
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles"}, Verbs: []string{"get", "create", "patch", "delete"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"get", "list", "create", "patch", "delete"}},
		// The ClusterRoleBinding of a gateway's pods to system:auth-delegator
		// (invalidation_endpoint_port), and bind of exactly that ClusterRole:
		// Kubernetes lets the provider bind no other ClusterRole whose
		// rights it does not hold itself.
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterrolebindings"}, Verbs: []string{"get", "create", "patch", "delete"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{gwruntime.AuthDelegatorClusterRole}, Verbs: []string{"bind"}},
	}
}

// ProviderNamespaceRules are the provider's rights in a namespace that
// holds Gateways (and in a class's parameters namespace).
func ProviderNamespaceRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"gateways"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"gateways/status"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts", "configmaps", "secrets", "services"}, Verbs: []string{"get", "create", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "create", "patch", "delete"}},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"list"}},
		{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"get", "create", "patch", "delete"}},
		{APIGroups: []string{vgwapi.Group}, Resources: []string{vgwapi.RoutingFragmentResource}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{vgwapi.Group}, Resources: []string{vgwapi.GatewayPodReportResource}, Verbs: []string{"get", "list", "create", "patch"}},
		{APIGroups: []string{vgwapi.Group}, Resources: []string{vgwapi.CacheInvalidationResource}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
	}
}

// GrantOnly lists, as "group/resource verb", the rights the provider holds
// only to grant them to the gateway pods (their Role and backend
// ClusterRole): it never uses them itself.
var GrantOnly = []string{
	gatewayv1.GroupName + "/gateways list",
	gatewayv1.GroupName + "/gateways watch",
	gatewayv1.GroupName + "/gateways/status get",
	gatewayv1.GroupName + "/referencegrants get",
	gatewayv1.GroupName + "/referencegrants watch",
	"/services watch",
	// The pods' Role lets them get, list and watch their VCL ConfigMap.
	"/configmaps list",
	"/configmaps watch",
	// The pods' Role lets them get, list and watch the certificate Secrets
	// of the HTTPS listeners by name (resourceNames); the provider only
	// gets a Secret, to check at plan that it exists.
	"/secrets list",
	"/secrets watch",
	"discovery.k8s.io/endpointslices get",
	"discovery.k8s.io/endpointslices watch",
	vgwapi.Group + "/" + vgwapi.GatewayPodReportResource + " get",
	vgwapi.Group + "/" + vgwapi.GatewayPodReportResource + " create",
	vgwapi.Group + "/" + vgwapi.GatewayPodReportResource + " patch",
	vgwapi.Group + "/" + vgwapi.CacheInvalidationResource + " list",
	vgwapi.Group + "/" + vgwapi.CacheInvalidationResource + " watch",
	// bind of system:auth-delegator is checked by the API server when the
	// provider binds the pods' ServiceAccount to it; it is never a request.
	rbacv1.GroupName + "/clusterroles bind",
}
