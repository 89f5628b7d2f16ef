package vgwapi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
)

// CRDRevision numbers the CRDs this build installs. EnsureCRDs never
// replaces CRDs of a higher revision (a newer provider installed them), so
// an older provider cannot take fields away from a newer one.
const CRDRevision = 2

// CRDRevisionAnnotation holds CRDRevision on the installed CRDs.
const CRDRevisionAnnotation = "varnishgw.dev/crd-revision"

// FieldManager is the server-side apply field manager of the provider's
// writes (the provider package's FieldManager).
const FieldManager = status.ProviderManager

// CRDs are the CustomResourceDefinitions of RoutingFragment,
// GatewayPodReport and CacheInvalidation.
func CRDs() []apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	nonEmpty := apiextensionsv1.JSONSchemaProps{Type: "string", MinLength: ptr(int64(1))}
	fragment := crd(RoutingFragmentKind, RoutingFragmentResource, "vgwfragment",
		"The routing one HTTPRoute contributes to one Gateway, written by the varnishgw provider and read by the "+
			"Gateway's pods. Only the provider should be allowed to write these: whoever can, controls the Gateway's routing.",
		apiextensionsv1.JSONSchemaProps{
			Type:     "object",
			Required: []string{"gateway", "route", "fragment"},
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"gateway": withDesc(nonEmpty, "The name of the Gateway, in this namespace."),
				"route":   withDesc(nonEmpty, "The HTTPRoute, as namespace/name."),
				"fragment": {
					Type:                   "object",
					Description:            "The routing fragment (varnishgw's versioned JSON format); the gateway pods validate it strictly.",
					XPreserveUnknownFields: ptr(true),
				},
			},
		},
		nil,
		[]apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Gateway", Type: "string", JSONPath: ".spec.gateway"},
			{Name: "Route", Type: "string", JSONPath: ".spec.route"},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		})
	rejection := apiextensionsv1.JSONSchemaProps{
		Type:     "object",
		Required: []string{"name", "resourceVersion", "reason"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"name":            withDesc(str, "The RoutingFragment's name."),
			"resourceVersion": withDesc(str, "The resource version that was rejected."),
			"reason":          withDesc(str, "What is wrong and what to do."),
			"kept":            withDesc(str, "The resource version of the last accepted version served instead; empty when none is."),
		},
	}
	report := crd(GatewayPodReportKind, GatewayPodReportResource, "vgwreport",
		"What one varnishgw gateway pod serves, written by that pod and deleted with it.",
		apiextensionsv1.JSONSchemaProps{
			Type:     "object",
			Required: []string{"gateway", "pod"},
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"gateway": withDesc(nonEmpty, "The name of the Gateway, in this namespace."),
				"pod":     withDesc(nonEmpty, "The name of the pod."),
			},
		},
		&apiextensionsv1.JSONSchemaProps{
			Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"routing": {
					Type:        "object",
					Description: "The routing the pod serves.",
					Required:    []string{"fragmentsResourceVersion", "gatewayGeneration", "fragments", "time"},
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"fragmentsResourceVersion": withDesc(str, "Every RoutingFragment write up to this resource version is served or rejected."),
						"gatewayGeneration":        {Type: "integer", Format: "int64", Description: "The Gateway generation the routing was built for."},
						"fragments":                {Type: "integer", Description: "The number of fragments served."},
						"rejected": {
							Type:        "array",
							Description: "The fragments the pod rejected.",
							Items:       &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &rejection},
						},
						"time": {Type: "string", Format: "date-time", Description: "When the pod loaded this routing."},
					},
				},
				"invalidations": {
					Type:        "array",
					Description: "The CacheInvalidations of the Gateway the pod has handled.",
					Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
						Type:     "object",
						Required: []string{"name", "uid", "time", "bans"},
						Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"name":    withDesc(str, "The CacheInvalidation's name."),
							"uid":     withDesc(str, "The CacheInvalidation's UID."),
							"time":    {Type: "string", Format: "date-time", Description: "When the pod applied it."},
							"bans":    {Type: "integer", Description: "The number of bans the pod issued."},
							"skipped": {Type: "boolean", Description: "True when the invalidation is older than the pod's cache: nothing to ban."},
							"error":   withDesc(str, "Why the pod could not apply it."),
						},
					}},
				},
			},
		},
		[]apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Gateway", Type: "string", JSONPath: ".spec.gateway"},
			{Name: "Fragments", Type: "integer", JSONPath: ".status.routing.fragments"},
			{Name: "Up-To", Type: "string", JSONPath: ".status.routing.fragmentsResourceVersion"},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		})
	return []apiextensionsv1.CustomResourceDefinition{fragment, report, invalidationCRD()}
}

func crd(kind, plural, short, description string, spec apiextensionsv1.JSONSchemaProps, status *apiextensionsv1.JSONSchemaProps,
	columns []apiextensionsv1.CustomResourceColumnDefinition) apiextensionsv1.CustomResourceDefinition {
	props := map[string]apiextensionsv1.JSONSchemaProps{
		"apiVersion": {Type: "string"},
		"kind":       {Type: "string"},
		"metadata":   {Type: "object"},
		"spec":       spec,
	}
	required := []string{"spec"}
	if status != nil {
		props["status"] = *status
	}
	return apiextensionsv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        plural + "." + Group,
			Annotations: map[string]string{CRDRevisionAnnotation: strconv.Itoa(CRDRevision)},
			Labels:      map[string]string{"app.kubernetes.io/name": "varnishgw"},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind),
				ShortNames: []string{short}, Categories: []string{"varnishgw"},
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Description: description, Required: required, Properties: props,
				}},
				AdditionalPrinterColumns: columns,
			}},
		},
	}
}

func withDesc(p apiextensionsv1.JSONSchemaProps, d string) apiextensionsv1.JSONSchemaProps {
	p.Description = d
	return p
}

func ptr[T any](v T) *T { return &v }

// EnsureCRDs installs or updates the CRDs with server-side apply and waits
// until the API server serves them. CRDs of a higher CRDRevision are left
// as they are. It never deletes anything.
func EnsureCRDs(ctx context.Context, ext apiextensionsclient.Interface) error {
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	for _, c := range CRDs() {
		cur, err := crds.Get(ctx, c.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("read the CustomResourceDefinition %s: %w", c.Name, err)
		default:
			if rev, _ := strconv.Atoi(cur.Annotations[CRDRevisionAnnotation]); rev >= CRDRevision && crdReady(cur) {
				continue
			}
		}
		data, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("encode the CustomResourceDefinition %s: %w", c.Name, err)
		}
		force := true
		if _, err := crds.Patch(ctx, c.Name, types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: FieldManager, Force: &force}); err != nil {
			return fmt.Errorf("install the CustomResourceDefinition %s: %w", c.Name, err)
		}
	}
	return WaitCRDs(ctx, ext, ext.Discovery(), time.Minute)
}

// WaitCRDs waits until every CRD is established and listed by discovery.
func WaitCRDs(ctx context.Context, ext apiextensionsclient.Interface, disc discovery.DiscoveryInterface, timeout time.Duration) error {
	for _, c := range CRDs() {
		var last string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			cur, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.Name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if !crdReady(cur) {
				last = "not established"
				return false, nil
			}
			list, err := disc.ServerResourcesForGroupVersion(GroupVersion.String())
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == c.Spec.Names.Plural }) {
				last = c.Spec.Names.Plural + " not in discovery"
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("wait for the CustomResourceDefinition %s: %w (last: %s)", c.Name, err, last)
		}
	}
	return nil
}

func crdReady(c *apiextensionsv1.CustomResourceDefinition) bool {
	return slices.ContainsFunc(c.Status.Conditions, func(cond apiextensionsv1.CustomResourceDefinitionCondition) bool {
		return cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue
	})
}

// invalidationCRD is the CacheInvalidation CRD: its schema checks what
// ValidateInvalidation checks except the regular expressions' subset,
// and makes the spec immutable.
func invalidationCRD() apiextensionsv1.CustomResourceDefinition {
	host := apiextensionsv1.JSONSchemaProps{
		Type: "string", MinLength: ptr(int64(1)), MaxLength: ptr(int64(MaxHostLength)), Pattern: hostPattern,
		Description: "The request's host name, lower case, without port.",
	}
	path := apiextensionsv1.JSONSchemaProps{Type: "string", MinLength: ptr(int64(1)), MaxLength: ptr(int64(MaxPathLength)), Pattern: pathPattern}
	list := func(desc string, item apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{
			Type: "array", Description: desc, MaxItems: ptr(int64(MaxInvalidationItems)),
			Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item},
		}
	}
	spec := apiextensionsv1.JSONSchemaProps{
		Type:     "object",
		Required: []string{"gateway"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"gateway": withDesc(apiextensionsv1.JSONSchemaProps{Type: "string", MinLength: ptr(int64(1)), MaxLength: ptr(int64(253))},
				"The name of the Gateway, in this namespace."),
			"purges": list("URLs whose cached objects are removed.", apiextensionsv1.JSONSchemaProps{
				Type:     "object",
				Required: []string{"host", "path"},
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"host": host,
					"path": withDesc(path, "The path as clients send it, without query."),
					"query": {Type: "string", MaxLength: ptr(int64(MaxPathLength)), Pattern: queryPattern,
						Description: "The query string as the cache key holds it, without '?': only that URL is removed. Left out, every query of the path is."},
				},
			}),
			"bans": list("Hosts plus a path prefix or a path regular expression whose cached objects are removed.", apiextensionsv1.JSONSchemaProps{
				Type:     "object",
				Required: []string{"host"},
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"host":       host,
					"pathPrefix": withDesc(path, "Paths starting with this prefix."),
					"pathRegex": {Type: "string", MinLength: ptr(int64(1)), MaxLength: ptr(int64(MaxPathLength)),
						Description: "Paths matching this regular expression (PCRE2, in varnishgw's portable subset; the pods refuse others)."},
				},
				XValidations: apiextensionsv1.ValidationRules{{
					Rule:    "has(self.pathPrefix) != has(self.pathRegex)",
					Message: "give exactly one of pathPrefix and pathRegex",
				}},
			}),
			"tags": list("Tags: objects whose response listed one of them in the cache policy's tag header are removed.", apiextensionsv1.JSONSchemaProps{
				Type: "string", MinLength: ptr(int64(1)), MaxLength: ptr(int64(MaxTagLength)), Pattern: tagPattern,
			}),
		},
		XValidations: apiextensionsv1.ValidationRules{
			{Rule: "self == oldSelf", Message: "the spec of a CacheInvalidation cannot change: create a new one"},
			{
				Rule:    "size(self.?purges.orValue([])) + size(self.?bans.orValue([])) + size(self.?tags.orValue([])) > 0",
				Message: "give at least one purge, ban or tag",
			},
		},
	}
	return crd(CacheInvalidationKind, CacheInvalidationResource, "vgwinval",
		"One invalidation of the cache of every pod of a varnishgw Gateway: the pods ban what it names and acknowledge "+
			"it in their GatewayPodReports. Whoever can create these can empty the Gateway's cache.",
		spec, nil,
		[]apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Gateway", Type: "string", JSONPath: ".spec.gateway"},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		})
}
