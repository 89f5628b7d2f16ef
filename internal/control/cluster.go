package control

import (
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
)

// FieldManager owns every field the provider writes with server-side apply.
const FieldManager = status.ProviderManager

// Cluster is a connection to one cluster and what the provider's
// operations on it share during a run.
type Cluster struct {
	Kube    kubernetes.Interface
	Gateway gatewayclient.Interface
	Dynamic dynamic.Interface
	Ext     apiextensionsclient.Interface
	// Host is the API server's URL, for messages.
	Host string
}

// ApplyOptions are the server-side apply options of every write: the
// provider's field manager, taking over fields another manager set.
func ApplyOptions() metav1.ApplyOptions {
	return metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
