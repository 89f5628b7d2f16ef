package conformance

import (
	"context"
	"fmt"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

// build holds the chaperone binary and the ghost VMOD, built once by
// TestMain.
var build *chaperonetest.Build

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "varnishgw-conformance-")
	if err == nil {
		build, err = chaperonetest.BuildIn(dir, raceBuild)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testenv.Main(m, testenv.AfterTests(func() { os.RemoveAll(dir) }))
}

// providerVCL plays the provider's part in writing main.vcl: it records
// vcl's digest on the Gateway (gwruntime.VCLDigestAnnotation, which the
// pods check) and returns the Gateway's VCL ConfigMap to write, labelled
// like the provider's runtime objects.
func providerVCL(t testing.TB, cp *testenv.ControlPlane, gw *gatewayv1.Gateway, vcl string) *corev1.ConfigMap {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, gwruntime.VCLDigestAnnotation, gwruntime.VCLDigest(vcl))
	if _, err := cp.Gateway.GatewayV1().Gateways(gw.Namespace).Patch(context.Background(), gw.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("record the VCL digest on Gateway %s/%s: %v", gw.Namespace, gw.Name, err)
	}
	ref := object.Ref{Namespace: gw.Namespace, Name: gw.Name}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: gw.Namespace, Name: gwruntime.VCLConfigMapName(ref), Labels: gwruntime.Labels(ref)},
		Data:       map[string]string{gwruntime.VCLDataKey: vcl},
	}
}

func ptr[T any](v T) *T { return &v }
