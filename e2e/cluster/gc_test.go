package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/tfcli"
)

// gcHCL is a class and a gateway alone; %[1]s is the namespace, %[2]s the
// image.
const gcHCL = tfcli.KubeconfigProvider + `
resource "varnishgw_gateway_class" "gc" {
  name                 = "gc-%[1]s"
  parameters_namespace = %[1]q
  image                = %[2]q
}

resource "varnishgw_gateway" "gc" {
  namespace          = %[1]q
  name               = "gc"
  gateway_class_name = varnishgw_gateway_class.gc.name
  rollout_timeout    = "4m"

  listener {
    name     = "http"
    port     = 80
    protocol = "HTTP"
  }
}
`

// TestGatewayGarbageCollected deletes a gateway's Gateway object behind
// the provider's back: Kubernetes' garbage collector deletes its
// namespaced runtime (the objects carry the Gateway as owner), pods
// included; an apply makes it again and the provider's destroy still
// leaves nothing, the cluster-scoped ClusterRole included.
func TestGatewayGarbageCollected(t *testing.T) {
	c := newCluster(t)
	tf := c.terraform()
	tf.write(fmt.Sprintf(gcHCL, c.ns, c.images.Gateway.Name))
	tf.mustRun("apply")
	gw := object.Ref{Namespace: c.ns, Name: "gc"}
	if len(c.gatewayPods(gw)) == 0 {
		t.Fatal("no gateway pod after apply")
	}

	if err := c.cp.Gateway.GatewayV1().Gateways(c.ns).Delete(c.ctx, gw.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ns, name := gw.Namespace, gwruntime.Name(gw)
	gone := map[string]func() error{
		"Deployment": func() error {
			_, err := c.cp.Client.AppsV1().Deployments(ns).Get(c.ctx, name, metav1.GetOptions{})
			return err
		},
		"Service": func() error {
			_, err := c.cp.Client.CoreV1().Services(ns).Get(c.ctx, name, metav1.GetOptions{})
			return err
		},
		"PodDisruptionBudget": func() error {
			_, err := c.cp.Client.PolicyV1().PodDisruptionBudgets(ns).Get(c.ctx, name, metav1.GetOptions{})
			return err
		},
		"ServiceAccount": func() error {
			_, err := c.cp.Client.CoreV1().ServiceAccounts(ns).Get(c.ctx, name, metav1.GetOptions{})
			return err
		},
		"Role": func() error {
			_, err := c.cp.Client.RbacV1().Roles(ns).Get(c.ctx, name, metav1.GetOptions{})
			return err
		},
		"RoleBinding": func() error {
			_, err := c.cp.Client.RbacV1().RoleBindings(ns).Get(c.ctx, name, metav1.GetOptions{})
			return err
		},
		"VCL ConfigMap": func() error {
			_, err := c.cp.Client.CoreV1().ConfigMaps(ns).Get(c.ctx, gwruntime.VCLConfigMapName(gw), metav1.GetOptions{})
			return err
		},
	}
	left := map[string]error{}
	err := wait.PollUntilContextTimeout(c.ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		clear(left)
		for what, get := range gone {
			if err := get(); !apierrors.IsNotFound(err) {
				left[what] = err
			}
		}
		return len(left) == 0 && len(c.gatewayPods(gw)) == 0, nil
	})
	if err != nil {
		t.Fatalf("2 minutes after the Gateway's deletion: left %v, %d gateway pods; want everything garbage collected", left, len(c.gatewayPods(gw)))
	}

	// The provider finds the gateway gone and makes it again; its destroy
	// deletes what the garbage collector cannot (the ClusterRole).
	tf.mustRun("apply")
	if len(c.gatewayPods(gw)) == 0 {
		t.Fatal("no gateway pod after the second apply")
	}
	tf.mustRun("destroy")
	c.expectNothingLeft(2*time.Minute, "app")
}
