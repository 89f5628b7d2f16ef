package control

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Invalidated is a CacheInvalidation written by Invalidate.
type Invalidated struct {
	Name, UID string
	// Applied are the gateway pods that acknowledged it.
	Applied []string
}

// Invalidate creates a CacheInvalidation of spec for the Gateway gw and,
// with wait, waits up to timeout for the acknowledgements of the Gateway's
// Ready pods. On an error after the object was created, the returned value
// names it.
func (c *Cluster) Invalidate(ctx context.Context, gw object.Ref, spec vgwapi.InvalidationSpec, wait bool, timeout time.Duration) (*Invalidated, error) {
	if _, err := c.Gateway.GatewayV1().Gateways(gw.Namespace).Get(ctx, gw.Name, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("the Gateway %s does not exist: check gateway_namespace and gateway_name, or create the gateway first", gw)
		}
		return nil, fmt.Errorf("read the Gateway %s: %w", gw, err)
	}
	if err := c.EnsureAPI(ctx); err != nil {
		return nil, err
	}
	obj, err := vgwapi.NewInvalidation(gw, "", spec)
	if err != nil {
		return nil, err
	}
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, gwruntime.ManagedLabels())
	obj.SetLabels(labels)
	created, err := c.Dynamic.Resource(vgwapi.CacheInvalidations).Namespace(gw.Namespace).Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("create the CacheInvalidation in namespace %s: %w", gw.Namespace, err)
	}
	out := &Invalidated{Name: created.GetName(), UID: string(created.GetUID()), Applied: []string{}}
	if !wait {
		return out, nil
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	applied, err := vgwapi.WaitAcknowledged(wctx, c.Dynamic, gw, out.UID,
		func(ctx context.Context) ([]string, error) { return c.ServedPods(ctx, gw) }, 200*time.Millisecond)
	var pending *vgwapi.InvalidationPending
	switch {
	case errors.As(err, &pending) && ctx.Err() == nil:
		out.Applied = append(out.Applied, pending.Applied...)
		return out, fmt.Errorf("%w within %s. Their chaperone logs say why (kubectl logs -c chaperone); raise applied_timeout, "+
			"or set wait_for_applied = false to skip the wait", err, timeout)
	case err != nil:
		return out, err
	}
	out.Applied = append(out.Applied, applied...)
	return out, nil
}
