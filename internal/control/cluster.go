package control

import (
	"sync"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// FieldManager owns every field the provider writes with server-side apply.
const FieldManager = status.ProviderManager

// ProviderClusterRoleName and ProviderNamespaceRoleName are the names the
// security guide gives the provider's two ClusterRoles, which messages
// about missing rights name.
const (
	ProviderClusterRoleName   = "varnishgw-provider"
	ProviderNamespaceRoleName = "varnishgw-provider-gateways"
)

// The parent kinds of a route.
const (
	gatewayKind     = "Gateway"
	listenerSetKind = "ListenerSet"
)

// Cluster is a connection to one cluster and what the provider's
// operations on it share during a run.
type Cluster struct {
	Kube    kubernetes.Interface
	Gateway gatewayclient.Interface
	Dynamic dynamic.Interface
	Ext     apiextensionsclient.Interface
	// Host is the API server's URL, for messages.
	Host string

	// apiReady is set once EnsureAPI installed the varnishgw.dev CRDs.
	apiMu    sync.Mutex
	apiReady bool

	// listenerSetLocks serialise, per Gateway, the ListenerSet applies of
	// this run (listenersets.go).
	listenerSetLocks gatewayLocks
	// routeRoles queue the changes to the route status Roles
	// (route_status_roles.go).
	routeRoles routeRoles
	// backendBindings are the routes' backend RoleBindings this process
	// knows of (routes.go).
	backendBindings backendBindingCache
	// reads is the read cache of NewCluster (reads.go); nil reads
	// everything from the API server.
	reads *readCache
}

// ApplyOptions are the server-side apply options of every write: the
// provider's field manager, taking over fields another manager set.
func ApplyOptions() metav1.ApplyOptions {
	return metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
}
