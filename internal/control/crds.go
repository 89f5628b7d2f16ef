package control

import (
	"context"
	"fmt"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// EnsureAPI installs or updates the varnishgw.dev CRDs once per provider
// run (vgwapi.EnsureCRDs).
func (c *Cluster) EnsureAPI(ctx context.Context) error {
	c.apiMu.Lock()
	defer c.apiMu.Unlock()
	if c.apiReady {
		return nil
	}
	if err := vgwapi.EnsureCRDs(ctx, c.Ext); err != nil {
		if apierrors.IsForbidden(err) {
			return fmt.Errorf("%w\nThe provider installs the CustomResourceDefinitions of %s (RoutingFragment, GatewayPodReport, CacheInvalidation) "+
				"and needs get, create and patch on customresourcedefinitions for that: grant its identity the provider role "+
				"of the security guide, or have a cluster administrator apply the provider once", err, vgwapi.Group)
		}
		return err
	}
	c.apiReady = true
	return nil
}
