package vgwapi

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vclregex"
)

// CacheInvalidation kind and resource.
const (
	CacheInvalidationKind     = "CacheInvalidation"
	CacheInvalidationResource = "cacheinvalidations"
)

// CacheInvalidations is the resource for dynamic clients and informers.
var CacheInvalidations = GroupVersion.WithResource(CacheInvalidationResource)

// Limits of one invalidation, the same in the CRD's schema and in
// ValidateInvalidation.
const (
	MaxInvalidationItems = 100  // purges, bans and tags, each
	MaxHostLength        = 253  // a DNS name
	MaxPathLength        = 1024 // like ghost.schema.json's path values
	MaxTagLength         = 256
)

// InvalidationSpec is a CacheInvalidation's spec: the Gateway (in the
// object's namespace) and what to remove from the cache of each of its
// pods. At least one purge, ban or tag; each list at most
// MaxInvalidationItems long. The spec cannot change: a new invalidation is
// a new object.
type InvalidationSpec struct {
	// Gateway is the name of the Gateway, in the invalidation's namespace.
	Gateway string `json:"gateway"`
	// Purges remove the objects of single URLs.
	Purges []Purge `json:"purges,omitempty"`
	// Bans remove the objects of a host whose path starts with a prefix or
	// matches a regular expression.
	Bans []Ban `json:"bans,omitempty"`
	// Tags remove the objects whose response listed one of these tags in
	// the cache policy's tag header.
	Tags []string `json:"tags,omitempty"`
}

// Purge is one URL: host, path and, when the cached object's key has one,
// the query string.
type Purge struct {
	// Host is the request's host, lower case, without port.
	Host string `json:"host"`
	// Path is the request's path as the client sent it, without query.
	Path string `json:"path"`
	// Query, when set, is the query string as the cache key holds it
	// (after the policy's include or exclude lists), without "?": the
	// purge removes that exact URL. Nil removes the path's objects
	// whatever their query.
	Query *string `json:"query,omitempty"`
}

// Ban is a host plus a path prefix or a path regular expression (exactly
// one of them).
type Ban struct {
	// Host is the request's host, lower case, without port.
	Host string `json:"host"`
	// PathPrefix matches paths that start with it, byte for byte.
	PathPrefix string `json:"pathPrefix,omitempty"`
	// PathRegex is a regular expression on the path (PCRE2, in the subset
	// vclregex.ValidateBan accepts).
	PathRegex string `json:"pathRegex,omitempty"`
}

// InvalidationReport is one pod's acknowledgement of one
// CacheInvalidation, in its GatewayPodReport's status.invalidations.
type InvalidationReport struct {
	// Name and UID are the CacheInvalidation's.
	Name string `json:"name"`
	UID  string `json:"uid"`
	// Time is when the pod applied it (or found it could not).
	Time metav1.Time `json:"time"`
	// Bans is the number of bans the pod issued: 0 when Skipped or Error.
	Bans int `json:"bans"`
	// Skipped is true when the invalidation is older than the pod's
	// varnishd cache child: its cache holds nothing from before, so
	// nothing was banned.
	Skipped bool `json:"skipped,omitempty"`
	// Error says why the pod could not apply it, and what to do; the
	// invalidation is not retried.
	Error string `json:"error,omitempty"`
}

// hostPattern is a lower-case DNS name or IPv4 address (no port): what the
// X-Ghost-Host object header holds.
const hostPattern = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`

// pathPattern: "/" then visible ASCII (no space, no control, no "?" or
// "#": the path ends at the query).
const pathPattern = `^/[!-"$-<=>@-~]*$`

// queryPattern: visible ASCII without "#".
const queryPattern = `^[!-"$-~]*$`

// tagPattern: visible ASCII (tags are separated by white space).
const tagPattern = `^[!-~]+$`

var (
	hostRE  = regexp.MustCompile(hostPattern)
	pathRE  = regexp.MustCompile(pathPattern)
	queryRE = regexp.MustCompile(queryPattern)
	tagRE   = regexp.MustCompile(tagPattern)
)

// ValidateInvalidation checks spec as the CRD's schema does, plus what the
// schema cannot say (a path regex must be in vclregex.ValidateBan's
// subset). Each error names the field, its value and the fix. The provider
// and the invalidation endpoint refuse what it refuses; the pods check
// again before issuing bans.
func ValidateInvalidation(spec *InvalidationSpec) error {
	var errs []error
	if spec.Gateway == "" {
		errs = append(errs, errors.New("gateway is empty: name the Gateway whose pods invalidate, in the invalidation's namespace"))
	}
	if len(spec.Purges)+len(spec.Bans)+len(spec.Tags) == 0 {
		errs = append(errs, errors.New("nothing to invalidate: give at least one purge URL, ban or tag"))
	}
	for name, n := range map[string]int{"purges": len(spec.Purges), "bans": len(spec.Bans), "tags": len(spec.Tags)} {
		if n > MaxInvalidationItems {
			errs = append(errs, fmt.Errorf("%s has %d entries, the limit is %d: split the invalidation into several", name, n, MaxInvalidationItems))
		}
	}
	for i, p := range spec.Purges {
		errs = append(errs, checkHost(fmt.Sprintf("purges[%d].host", i), p.Host))
		errs = append(errs, checkPath(fmt.Sprintf("purges[%d].path", i), p.Path))
		if p.Query != nil {
			if q := *p.Query; len(q) > MaxPathLength || !queryRE.MatchString(q) {
				errs = append(errs, fmt.Errorf("purges[%d].query = %q: want the query string without \"?\" or \"#\", visible ASCII (percent-encode the rest) and at most %d bytes", i, q, MaxPathLength))
			}
		}
	}
	for i, b := range spec.Bans {
		errs = append(errs, checkHost(fmt.Sprintf("bans[%d].host", i), b.Host))
		switch {
		case b.PathPrefix != "" && b.PathRegex != "":
			errs = append(errs, fmt.Errorf("bans[%d] has both pathPrefix %q and pathRegex %q: give one of them (two bans for both)", i, b.PathPrefix, b.PathRegex))
		case b.PathPrefix != "":
			errs = append(errs, checkPath(fmt.Sprintf("bans[%d].pathPrefix", i), b.PathPrefix))
		case b.PathRegex != "":
			if err := vclregex.ValidateBan(b.PathRegex); err != nil {
				errs = append(errs, fmt.Errorf("bans[%d].pathRegex = %q: %v", i, b.PathRegex, err))
			}
		default:
			errs = append(errs, fmt.Errorf("bans[%d] has neither pathPrefix nor pathRegex: give one, e.g. pathPrefix = \"/\" for the whole host", i))
		}
	}
	for i, tag := range spec.Tags {
		if len(tag) > MaxTagLength || !tagRE.MatchString(tag) {
			errs = append(errs, fmt.Errorf("tags[%d] = %q: want a tag as the origin lists it, visible ASCII without white space, at most %d bytes", i, tag, MaxTagLength))
		}
	}
	return errors.Join(errs...)
}

func checkHost(field, h string) error {
	if len(h) > MaxHostLength || !hostRE.MatchString(h) {
		return fmt.Errorf("%s = %q: want the request's host name in lower case without port, e.g. www.example.com", field, h)
	}
	return nil
}

func checkPath(field, p string) error {
	if len(p) > MaxPathLength || !pathRE.MatchString(p) {
		return fmt.Errorf("%s = %q: want a path starting with \"/\", visible ASCII without \"?\" or \"#\" (percent-encoded as clients send it) and at most %d bytes", field, p, MaxPathLength)
	}
	return nil
}

// NewInvalidation is the CacheInvalidation of spec for gw, to create:
// named generateName-style from the Gateway (name empty) unless name is
// given, labelled for gw.
func NewInvalidation(gw object.Ref, name string, spec InvalidationSpec) (*unstructured.Unstructured, error) {
	spec.Gateway = gw.Name
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	if err != nil {
		return nil, fmt.Errorf("encode the invalidation of Gateway %s: %w", gw, err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": raw}}
	obj.SetAPIVersion(GroupVersion.String())
	obj.SetKind(CacheInvalidationKind)
	obj.SetNamespace(gw.Namespace)
	if name != "" {
		obj.SetName(name)
	} else {
		prefix := gw.Name
		if len(prefix) > 200 {
			prefix = prefix[:200]
		}
		obj.SetGenerateName(strings.TrimSuffix(prefix, "-") + "-")
	}
	obj.SetLabels(gwruntime.GatewayLabels(gw))
	return obj, nil
}

// ReadInvalidation decodes the CacheInvalidation obj of gw and validates
// it (ValidateInvalidation; unknown fields are errors).
func ReadInvalidation(gw object.Ref, obj *unstructured.Unstructured) (*InvalidationSpec, error) {
	if obj.GetNamespace() != gw.Namespace {
		return nil, fmt.Errorf("it is in namespace %q, not in the Gateway's namespace %q", obj.GetNamespace(), gw.Namespace)
	}
	var spec InvalidationSpec
	raw, _, _ := unstructured.NestedMap(obj.Object, "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(raw, &spec, true); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	if spec.Gateway != gw.Name {
		return nil, fmt.Errorf("spec.gateway is %q, not %q", spec.Gateway, gw.Name)
	}
	if err := ValidateInvalidation(&spec); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	return &spec, nil
}

// Invalidation returns r's acknowledgement of the CacheInvalidation uid,
// nil when the pod has not acknowledged it.
func (r *GatewayPodReport) Invalidation(uid string) *InvalidationReport {
	if r == nil {
		return nil
	}
	for i := range r.Status.Invalidations {
		if r.Status.Invalidations[i].UID == uid {
			return &r.Status.Invalidations[i]
		}
	}
	return nil
}

// SortInvalidations orders acknowledgements by name then UID, the order a
// report lists them in.
func SortInvalidations(list []InvalidationReport) {
	sort.Slice(list, func(i, j int) bool {
		if list[i].Name != list[j].Name {
			return list[i].Name < list[j].Name
		}
		return list[i].UID < list[j].UID
	})
}

// InvalidationError is a wait that ended because a pod refused the
// invalidation.
type InvalidationError struct {
	Pod, Reason string
}

func (e *InvalidationError) Error() string {
	return fmt.Sprintf("gateway pod %s refused the cache invalidation: %s", e.Pod, e.Reason)
}

// InvalidationPending is a wait that ended before every pod acknowledged.
type InvalidationPending struct {
	// Applied and Pending are pod names.
	Applied, Pending []string
	// Last is the error of the last check, if it failed.
	Last error
}

func (e *InvalidationPending) Error() string {
	msg := fmt.Sprintf("gateway pods %s have not acknowledged the cache invalidation", strings.Join(e.Pending, ", "))
	if e.Last != nil {
		msg += fmt.Sprintf(" (the last check failed: %v)", e.Last)
	}
	return msg
}

// WaitAcknowledged polls until every pod pods returns (the Gateway's Ready,
// non-terminating pods, read again at each check) has acknowledged the
// CacheInvalidation uid of gw in its GatewayPodReport, and returns the pods
// that did, sorted. A pod's refusal ends the wait with an
// *InvalidationError; ctx ending first, with an *InvalidationPending
// (wrapping nothing: check ctx for why).
func WaitAcknowledged(ctx context.Context, dyn dynamic.Interface, gw object.Ref, uid string,
	pods func(context.Context) ([]string, error), interval time.Duration) ([]string, error) {
	var applied, pending []string
	var last error
	for {
		ok, err := func() (bool, error) {
			names, err := pods(ctx)
			if err != nil {
				return false, err
			}
			reports, err := ReadReports(ctx, dyn, gw)
			if err != nil {
				return false, err
			}
			applied, pending = nil, nil
			for _, p := range names {
				ack := reports[p].Invalidation(uid)
				switch {
				case ack == nil:
					pending = append(pending, p)
				case ack.Error != "":
					return false, &InvalidationError{Pod: gw.Namespace + "/" + p, Reason: ack.Error}
				default:
					applied = append(applied, p)
				}
			}
			return len(pending) == 0, nil
		}()
		var refused *InvalidationError
		switch {
		case errors.As(err, &refused):
			return nil, err
		case err != nil && ctx.Err() != nil:
			// The check was cut short by ctx ending: that says nothing about
			// the API, so the last complete check's outcome stands.
		case err != nil:
			last = err
		case ok:
			sort.Strings(applied)
			return applied, nil
		default:
			last = nil
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, &InvalidationPending{Applied: applied, Pending: pending, Last: last}
		case <-t.C:
		}
	}
}
