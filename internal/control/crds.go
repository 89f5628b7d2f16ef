package control

import (
	"context"
	"fmt"
	"strings"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
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

const (
	// HTTPRouteCRD is the name of the HTTPRoute CustomResourceDefinition.
	HTTPRouteCRD = "httproutes." + gatewayv1.GroupName
	// GatewayAPIChannelAnnotation and GatewayAPIBundleAnnotation are the
	// annotations of the Gateway API's CRDs naming their channel and
	// release.
	GatewayAPIChannelAnnotation = gatewayv1.GroupName + "/channel"
	GatewayAPIBundleAnnotation  = gatewayv1.GroupName + "/bundle-version"
)

// CRDHasField reports whether version's schema of crd has field (under
// spec, "[]" stepping into list items).
func CRDHasField(crd *apiextensionsv1.CustomResourceDefinition, version, field string) bool {
	var s *apiextensionsv1.JSONSchemaProps
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Name == version && v.Schema != nil {
			s = v.Schema.OpenAPIV3Schema
		}
	}
	if s == nil {
		return false
	}
	for _, seg := range append([]string{"spec"}, strings.Split(field, ".")...) {
		name, list := strings.CutSuffix(seg, "[]")
		p, ok := s.Properties[name]
		if !ok {
			return false
		}
		s = &p
		if list {
			if s.Items == nil || s.Items.Schema == nil {
				return false
			}
			s = s.Items.Schema
		}
	}
	return true
}

// ReadHTTPRouteCRD reads the cluster's HTTPRoute CustomResourceDefinition.
func (c *Cluster) ReadHTTPRouteCRD(ctx context.Context) (*apiextensionsv1.CustomResourceDefinition, error) {
	return c.Ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, HTTPRouteCRD, metav1.GetOptions{})
}
