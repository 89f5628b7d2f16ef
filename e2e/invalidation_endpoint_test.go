package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/invalidation"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// endpointHCL is a gateway with the invalidation endpoint, after
// classHCL("c", ...); %[1]s is the namespace, %[2]d the listener port and
// %[3]d the endpoint's port.
const endpointHCL = `
resource "varnishgw_gateway" "g" {
  namespace                  = %[1]q
  name                       = "edge"
  gateway_class_name         = varnishgw_gateway_class.c.name
  wait_for_rollout           = false
  invalidation_endpoint_port = %[3]d

  listener {
    name     = "http"
    port     = %[2]d
    protocol = "HTTP"
  }
}
`

// TestInvalidationEndpointFromTerraform: a gateway applied with
// invalidation_endpoint_port gives its pods what POST /invalidate needs
// and nothing is granted by hand: a chaperone started with the
// Deployment's command line, as the gateway's ServiceAccount (its real
// token, with only the rights the provider granted), answers 403 to a
// caller without the right to create cacheinvalidations and 200 to one
// with it, once the pod acknowledged the invalidation.
func TestInvalidationEndpointFromTerraform(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	gw := object.Ref{Namespace: ns, Name: "edge"}
	dir := varnishdtest.Dir(t)
	listenPort := varnishdtest.Port(t, varnishdtest.FreeAddr(t))
	endpointPort := varnishdtest.Port(t, varnishdtest.FreeAddr(t))

	tf := newWorkspace(ctx, t, cp)
	run := func(args ...string) {
		t.Helper()
		if out, err := tf.run(ctx, args...); err != nil {
			t.Fatalf("terraform %s: %v\n%s", args[0], err, out)
		}
	}
	if err := tf.WriteFile("main.tf", classHCL("c", ns, "endpoint-"+ns)+fmt.Sprintf(endpointHCL, ns, listenPort, endpointPort)); err != nil {
		t.Fatal(err)
	}
	run("apply")
	t.Cleanup(func() { run("destroy") })

	argv, _, err := demo.PodCommand(ctx, cp.Client, gw, "demo-0")
	if err != nil {
		t.Fatal(err)
	}
	if flag := fmt.Sprintf("--invalidate-addr=:%d", endpointPort); !slices.Contains(argv, flag) {
		t.Fatalf("the Deployment's chaperone command %q lacks %s", argv, flag)
	}

	// The pod as the endpoint sees it: Ready, with the gateway's labels.
	pod, err := cp.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-0", Labels: gwruntime.Labels(gw)},
		Spec:       corev1.PodSpec{ServiceAccountName: gwruntime.Name(gw), Containers: []corev1.Container{{Name: "chaperone", Image: "gateway"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if _, err := cp.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, gwruntime.Name(gw))
	if err != nil {
		t.Fatal(err)
	}
	vmodDir := varnishdtest.Dir(t)
	if _, err := varnishdtest.BuildGhost(vmodDir); err != nil {
		t.Fatal(err)
	}
	ch := startChaperone(ctx, t, cp, demo.ChaperoneOptions{
		Gateway: gw, Kubeconfig: kubeconfig, Dir: dir, VMODDir: vmodDir, ListenHost: "127.0.0.1",
	})
	if err := ch.Ready(ctx, 90*time.Second); err != nil {
		t.Fatal(err)
	}

	token := func(name string) string {
		t.Helper()
		if _, err := cp.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cp.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{invalidation.Audience}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	cp.GrantRole(t, ns, "purger", ns, "purger", []rbacv1.PolicyRule{{APIGroups: []string{vgwapi.Group}, Resources: []string{vgwapi.CacheInvalidationResource}, Verbs: []string{"create"}}})
	purger, reader := token("purger"), token("reader")
	post := func(token string) (int, invalidation.Response) {
		t.Helper()
		req, _ := http.NewRequest("POST", fmt.Sprintf("http://127.0.0.1:%d%s", endpointPort, invalidation.Path),
			strings.NewReader(`{"bans": [{"host": "www.example.com", "pathPrefix": "/assets/"}]}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", invalidation.Path, err)
		}
		defer resp.Body.Close()
		var out invalidation.Response
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("POST %s: %d, body not JSON: %v", invalidation.Path, resp.StatusCode, err)
		}
		return resp.StatusCode, out
	}
	if code, out := post(reader); code != http.StatusForbidden {
		t.Errorf("a caller without the right: %d %+v, want 403", code, out)
	}
	code, out := post(purger)
	if code != http.StatusOK || !slices.Equal(out.Applied, []string{"demo-0"}) {
		t.Fatalf("a caller with the right: %d %+v, want 200 applied by demo-0", code, out)
	}
}
