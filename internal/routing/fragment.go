package routing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vclregex"
)

// FragmentVersion is the version of the fragment format. A chaperone
// rejects a fragment of another version, and its pod reports the rejection
// (the apply that wrote it fails), instead of serving a route it cannot
// read in full.
const FragmentVersion = 1

// Fragment is what one HTTPRoute contributes to one parent Gateway after
// attachment and validation. The provider stores it (MarshalFragment) in a
// RoutingFragment per (route, gateway) in the Gateway's namespace; the
// chaperone reads it back (UnmarshalFragment) and merges all fragments of
// its Gateway. What is stored is the fragment format's own types
// (fragment_format.go), converted from and to these, so that these types,
// and the ghostjson types they hold, can change without changing it.
type Fragment struct {
	// Version is FragmentVersion.
	Version int `json:"version"`
	// Gateway is the parent Gateway.
	Gateway object.Ref `json:"gateway"`
	// Route identifies the HTTPRoute; its creation time orders routes (GEP-713).
	Route RouteRef `json:"route"`
	// Parents holds the status for each parentRef of the route that names
	// this Gateway, in spec order.
	Parents []ParentStatus `json:"parents"`
	// Listeners are the listeners the route is attached to, by name, with
	// the hostnames it serves on each. Empty when the route is not accepted.
	Listeners []AttachedListener `json:"listeners"`
	// Rules are the route's rules, normalised (defaults filled in). Empty
	// when the route is not accepted.
	Rules []Rule `json:"rules"`
}

// RouteRef identifies an HTTPRoute.
type RouteRef struct {
	Namespace         string    `json:"namespace"`
	Name              string    `json:"name"`
	UID               string    `json:"uid,omitempty"`
	Generation        int64     `json:"generation,omitempty"`
	CreationTimestamp time.Time `json:"creationTimestamp"`
}

func (r RouteRef) String() string { return r.Namespace + "/" + r.Name }

// ParentStatus is the status one parentRef must get.
type ParentStatus struct {
	ParentRef  gatewayv1.ParentReference `json:"parentRef"`
	Conditions []Condition               `json:"conditions"`
}

// Condition is a route condition without the bookkeeping fields
// (observedGeneration, lastTransitionTime) that the writer of the status adds.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// RouteParent is what the writer of the HTTPRoute status sets in the
// status entry of p's parentRef (status.RouteParent): p's conditions,
// with the controller name and the route generation they were computed
// for. The caller sets Keep for the conditions another writer owns, and
// builds the entry from the route's existing one (status.RouteParent.Build).
func (p ParentStatus) RouteParent(controller gatewayv1.GatewayController, generation int64) status.RouteParent {
	rp := status.RouteParent{ParentRef: p.ParentRef, Controller: controller, Generation: generation}
	for _, c := range p.Conditions {
		rp.Set = append(rp.Set, c.Metav1())
	}
	return rp
}

// RouteParentStatus converts p to a new status entry (RouteParent, built
// without an existing entry): the controller name, the route generation
// the conditions were computed for, and now as every condition's
// transition time.
func (p ParentStatus) RouteParentStatus(controller gatewayv1.GatewayController, generation int64, now metav1.Time) gatewayv1.RouteParentStatus {
	return p.RouteParent(controller, generation).Build(nil, now)
}

// Metav1 is c as a Kubernetes condition, without observedGeneration and
// lastTransitionTime.
func (c Condition) Metav1() metav1.Condition {
	return metav1.Condition{Type: c.Type, Status: metav1.ConditionStatus(c.Status), Reason: c.Reason, Message: c.Message}
}

// AttachedListener is a listener the route is attached to.
type AttachedListener struct {
	Name string `json:"name"`
	Port int32  `json:"port"`
	// Hostnames are the intersections of the listener's and the route's
	// hostnames, lower case, sorted; "*" means any host.
	Hostnames []string `json:"hostnames"`
}

// Rule is one normalised HTTPRoute rule.
type Rule struct {
	// Index is the rule's index in spec.rules.
	Index int    `json:"index"`
	Name  string `json:"name,omitempty"`
	// Matches are never empty: a rule without matches gets PathPrefix "/".
	Matches  []ghostjson.Match   `json:"matches"`
	Filters  []Filter            `json:"filters,omitempty"`
	Timeouts *ghostjson.Timeouts `json:"timeouts,omitempty"`
	// Retry is the rule's retry policy (HTTPRoute retry), defaults filled
	// in; nil: no retries.
	Retry    *ghostjson.Retry `json:"retry,omitempty"`
	Backends []BackendRef     `json:"backends,omitempty"`
	// Cache is the rule's own cache policy (the provider sets it after
	// Attach); nil: the rule takes the Gateway's default policy
	// (EffectiveCache).
	Cache *CachePolicy `json:"cache,omitempty"`
	// SessionPersistence keeps a client on one endpoint of the rule's
	// backends by cookie; nil: none.
	SessionPersistence *SessionPersistence `json:"sessionPersistence,omitempty"`
}

// Filter is a rule filter; it is ghostjson.Filter except that a mirror names
// an unresolved backend.
type Filter struct {
	Type                   string                    `json:"type"`
	RequestHeaderModifier  *ghostjson.HeaderModifier `json:"requestHeaderModifier,omitempty"`
	ResponseHeaderModifier *ghostjson.HeaderModifier `json:"responseHeaderModifier,omitempty"`
	RequestRedirect        *ghostjson.Redirect       `json:"requestRedirect,omitempty"`
	URLRewrite             *ghostjson.Rewrite        `json:"urlRewrite,omitempty"`
	RequestMirror          *MirrorRef                `json:"requestMirror,omitempty"`
	CORS                   *ghostjson.CORS           `json:"cors,omitempty"`
}

// MirrorRef is a RequestMirror filter before resolution.
type MirrorRef struct {
	Backend BackendRef `json:"backend"`
	Percent *int32     `json:"percent,omitempty"`
}

// BackendRef is a backendRef by Service namespace, name and port, not yet
// resolved to endpoints.
type BackendRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Port      int32  `json:"port"`
	Weight    int32  `json:"weight"`
	// Unresolved is the ResolvedRefs reason (RefNotPermitted, InvalidKind,
	// BackendNotFound, UnsupportedProtocol) when the reference could not be resolved at attach
	// time. InvalidKind groups never get endpoints; for the others Resolve
	// checks the Service and ReferenceGrants again.
	Unresolved string `json:"unresolved,omitempty"`
	// Filters are the backendRef's own filters, applied only when this
	// backend is picked: a RequestHeaderModifier at most. Only in a
	// rule's backends (not a mirror's).
	Filters []Filter `json:"filters,omitempty"`
}

// GroupName is the backend group name in ghost.json: namespace/service:port.
func (b BackendRef) GroupName() string {
	return b.Namespace + "/" + b.Name + ":" + strconv.Itoa(int(b.Port))
}

// Accepted reports whether the route is attached to at least one listener.
func (f *Fragment) Accepted() bool { return len(f.Listeners) > 0 }

// MarshalFragment encodes f as indented JSON in the stored format
// (fragment_format.go) after validating it, with FragmentVersion (whatever
// f.Version says).
func MarshalFragment(f *Fragment) ([]byte, error) {
	if f != nil && f.Version != FragmentVersion {
		c := *f
		c.Version = FragmentVersion
		f = &c
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("marshal fragment: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(fragmentToV1(f)); err != nil {
		return nil, fmt.Errorf("marshal fragment %s for gateway %s: %w", f.Route, f.Gateway, err)
	}
	return buf.Bytes(), nil
}

// UnmarshalFragment decodes a fragment of the stored format and validates
// it. Unknown fields and versions other than FragmentVersion are rejected.
func UnmarshalFragment(data []byte) (*Fragment, error) {
	var probe struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("unmarshal fragment: %w", err)
	}
	if probe.Version == nil || *probe.Version != FragmentVersion {
		v := "absent"
		if probe.Version != nil {
			v = fmt.Sprint(*probe.Version)
		}
		return nil, fmt.Errorf("unmarshal fragment: version is %s, this build reads version %d: run the chaperone and the provider of one release (set the class's image to the provider's release and apply again)", v, FragmentVersion)
	}
	var stored fragmentV1
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&stored); err != nil {
		return nil, fmt.Errorf("unmarshal fragment: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("unmarshal fragment: trailing data after the JSON object")
	}
	f := stored.fragment()
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("unmarshal fragment: %w", err)
	}
	return f, nil
}

// Validate checks a fragment's structure and every value that ends up in
// ghost.json, so a hand-edited or corrupt RoutingFragment cannot reach varnishd.
func (f *Fragment) Validate() error {
	if f == nil {
		return fmt.Errorf("nil fragment")
	}
	var errs field.ErrorList
	if f.Version != FragmentVersion {
		errs = append(errs, field.Invalid(field.NewPath("version"), f.Version, fmt.Sprintf("must be %d", FragmentVersion)))
	}
	errs = append(errs, validateObjectName(field.NewPath("gateway"), f.Gateway.Namespace, f.Gateway.Name)...)
	errs = append(errs, validateObjectName(field.NewPath("route"), f.Route.Namespace, f.Route.Name)...)
	lp := field.NewPath("listeners")
	for i, l := range f.Listeners {
		p := lp.Index(i)
		if l.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "the listener name"))
		}
		if l.Port < 1 || l.Port > 65535 {
			errs = append(errs, field.Invalid(p.Child("port"), l.Port, "must be a port number from 1 to 65535"))
		}
		if len(l.Hostnames) == 0 {
			errs = append(errs, field.Required(p.Child("hostnames"), `at least one hostname, "*" for any`))
		}
		for j, h := range l.Hostnames {
			if h != anyHost {
				errs = append(errs, validateHostname(p.Child("hostnames").Index(j), h, true)...)
			}
		}
	}
	rp := field.NewPath("rules")
	for i := range f.Rules {
		errs = append(errs, validateRule(rp.Index(i), &f.Rules[i])...)
	}
	return errs.ToAggregate()
}

func validateObjectName(p *field.Path, ns, name string) field.ErrorList {
	var errs field.ErrorList
	if ns == "" {
		errs = append(errs, field.Required(p.Child("namespace"), ""))
	}
	if name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	return errs
}

func validateRule(p *field.Path, r *Rule) field.ErrorList {
	var errs field.ErrorList
	if len(r.Matches) == 0 {
		errs = append(errs, field.Required(p.Child("matches"), `at least one match; a rule without matches is PathPrefix "/"`))
	}
	for i := range r.Matches {
		errs = append(errs, validateGhostMatch(p.Child("matches").Index(i), &r.Matches[i])...)
	}
	for i := range r.Backends {
		bp := p.Child("backends").Index(i)
		b := &r.Backends[i]
		errs = append(errs, validateBackendRef(bp, b)...)
		for j, fl := range b.Filters {
			fp := bp.Child("filters").Index(j)
			switch {
			case j > 0:
				errs = append(errs, field.TooMany(bp.Child("filters"), len(b.Filters), 1))
			case fl.Type != ghostjson.FilterRequestHeaderModifier:
				errs = append(errs, field.NotSupported(fp.Child("type"), fl.Type, []string{ghostjson.FilterRequestHeaderModifier}))
			case fl.RequestHeaderModifier == nil || fl.ResponseHeaderModifier != nil || fl.RequestRedirect != nil || fl.URLRewrite != nil ||
				fl.RequestMirror != nil || fl.CORS != nil:
				errs = append(errs, field.Invalid(fp, fl.Type, "exactly one filter field must be set, the one named by type"))
			default:
				errs = append(errs, validateGhostHeaderModifier(fp.Child("requestHeaderModifier"), fl.RequestHeaderModifier)...)
			}
		}
	}
	for i, fl := range r.Filters {
		fp := p.Child("filters").Index(i)
		n := 0
		for _, set := range []bool{fl.RequestHeaderModifier != nil, fl.ResponseHeaderModifier != nil, fl.RequestRedirect != nil, fl.URLRewrite != nil, fl.RequestMirror != nil, fl.CORS != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, field.Invalid(fp, fl.Type, "exactly one filter field must be set, the one named by type"))
			continue
		}
		switch fl.Type {
		case ghostjson.FilterRequestHeaderModifier:
			errs = append(errs, validateGhostHeaderModifier(fp.Child("requestHeaderModifier"), fl.RequestHeaderModifier)...)
		case ghostjson.FilterResponseHeaderModifier:
			errs = append(errs, validateGhostHeaderModifier(fp.Child("responseHeaderModifier"), fl.ResponseHeaderModifier)...)
		case ghostjson.FilterRequestRedirect:
			if fl.RequestRedirect == nil {
				errs = append(errs, field.Required(fp.Child("requestRedirect"), ""))
			}
		case ghostjson.FilterURLRewrite:
			if fl.URLRewrite == nil {
				errs = append(errs, field.Required(fp.Child("urlRewrite"), ""))
			}
		case ghostjson.FilterRequestMirror:
			if fl.RequestMirror == nil {
				errs = append(errs, field.Required(fp.Child("requestMirror"), ""))
				break
			}
			errs = append(errs, validateBackendRef(fp.Child("requestMirror", "backend"), &fl.RequestMirror.Backend)...)
			if len(fl.RequestMirror.Backend.Filters) > 0 {
				errs = append(errs, field.Forbidden(fp.Child("requestMirror", "backend", "filters"), "a mirror's backend has no filters: remove them"))
			}
			if pc := fl.RequestMirror.Percent; pc != nil && (*pc < 0 || *pc > 100) {
				errs = append(errs, field.Invalid(fp.Child("requestMirror", "percent"), *pc, "must be from 0 to 100"))
			}
		case ghostjson.FilterCORS:
			if fl.CORS == nil {
				errs = append(errs, field.Required(fp.Child("cors"), ""))
				break
			}
			errs = append(errs, validateGhostCORS(fp.Child("cors"), fl.CORS)...)
		default:
			errs = append(errs, field.NotSupported(fp.Child("type"), fl.Type, supportedFilterTypes))
		}
	}
	errs = append(errs, ValidateCachePolicy(p.Child("cache"), r.Cache)...)
	errs = append(errs, validateFragmentSession(p.Child("sessionPersistence"), r.SessionPersistence)...)
	if t := r.Timeouts; t != nil && (t.RequestMs < 0 || t.BackendRequestMs < 0) {
		errs = append(errs, field.Invalid(p.Child("timeouts"), *t, "timeouts must not be negative"))
	}
	if rt := r.Retry; rt != nil {
		errs = append(errs, validateGhostRetry(p.Child("retry"), rt)...)
		for i := range r.Backends {
			if len(r.Backends[i].Filters) > 0 {
				errs = append(errs, field.Forbidden(p.Child("retry"), retryWithBackendFilters))
				break
			}
		}
	}
	return errs
}

// validateGhostRetry checks a normalised retry policy against ghost's
// limits.
func validateGhostRetry(p *field.Path, rt *ghostjson.Retry) field.ErrorList {
	var errs field.ErrorList
	if rt.Attempts < 1 || rt.Attempts > ghostjson.MaxRetryAttempts {
		errs = append(errs, field.Invalid(p.Child("attempts"), rt.Attempts, fmt.Sprintf("must be from 1 to %d", ghostjson.MaxRetryAttempts)))
	}
	if rt.BackoffMs < 0 || rt.BackoffMs > ghostjson.MaxRetryBackoffMs {
		errs = append(errs, field.Invalid(p.Child("backoffMs"), rt.BackoffMs, fmt.Sprintf("must be from 0 to %d milliseconds", ghostjson.MaxRetryBackoffMs)))
	}
	errs = append(errs, validateRetryCodes(p.Child("codes"), rt.Codes)...)
	return errs
}

// validateRetryCodes checks retry status codes: 400 to 599, each once.
func validateRetryCodes(p *field.Path, codes []int) field.ErrorList {
	var errs field.ErrorList
	seen := make(map[int]bool, len(codes))
	for i, c := range codes {
		switch {
		case c < 400 || c > 599:
			errs = append(errs, field.Invalid(p.Index(i), c, "must be an HTTP status from 400 to 599, such as 502 or 503"))
		case seen[c]:
			errs = append(errs, field.Duplicate(p.Index(i), c))
		}
		seen[c] = true
	}
	return errs
}

func validateBackendRef(p *field.Path, b *BackendRef) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateObjectName(p, b.Namespace, b.Name)...)
	if b.Port < 1 || b.Port > 65535 {
		errs = append(errs, field.Invalid(p.Child("port"), b.Port, "must be a port number from 1 to 65535"))
	}
	if b.Weight < 0 || b.Weight > maxWeight {
		errs = append(errs, field.Invalid(p.Child("weight"), b.Weight, fmt.Sprintf("must be from 0 to %d", maxWeight)))
	}
	return errs
}

func validateGhostMatch(p *field.Path, m *ghostjson.Match) field.ErrorList {
	var errs field.ErrorList
	pp := p.Child("path", "value")
	switch m.Path.Type {
	case ghostjson.PathExact, ghostjson.PathPrefix:
		errs = append(errs, validatePathValue(pp, m.Path.Value)...)
	case ghostjson.PathRegularExpression:
		if err := vclregex.Validate(m.Path.Value); err != nil {
			errs = append(errs, field.Invalid(pp, m.Path.Value, err.Error()))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("path", "type"), m.Path.Type, []string{ghostjson.PathExact, ghostjson.PathPrefix, ghostjson.PathRegularExpression}))
	}
	if m.Method != "" && !supportedMethods[m.Method] {
		errs = append(errs, field.NotSupported(p.Child("method"), m.Method, methodList))
	}
	errs = append(errs, validateValueMatches(p.Child("headers"), m.Headers)...)
	errs = append(errs, validateValueMatches(p.Child("queryParams"), m.QueryParams)...)
	return errs
}

func validateValueMatches(p *field.Path, ms []ghostjson.ValueMatch) field.ErrorList {
	var errs field.ErrorList
	if len(ms) > maxValueMatches {
		errs = append(errs, field.TooMany(p, len(ms), maxValueMatches))
	}
	for i, m := range ms {
		ip := p.Index(i)
		// Header and query parameter names are both HTTP tokens.
		errs = append(errs, validateHeaderName(ip.Child("name"), m.Name)...)
		switch m.Type {
		case ghostjson.PathExact:
			errs = append(errs, validateHeaderValue(ip.Child("value"), m.Value)...)
		case ghostjson.PathRegularExpression:
			if err := vclregex.Validate(m.Value); err != nil {
				errs = append(errs, field.Invalid(ip.Child("value"), m.Value, err.Error()))
			}
		default:
			errs = append(errs, field.NotSupported(ip.Child("type"), m.Type, []string{ghostjson.PathExact, ghostjson.PathRegularExpression}))
		}
	}
	return errs
}

func validateGhostHeaderModifier(p *field.Path, hm *ghostjson.HeaderModifier) field.ErrorList {
	if hm == nil {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	for _, l := range []struct {
		name string
		vals []ghostjson.HeaderValue
	}{{"set", hm.Set}, {"add", hm.Add}} {
		for i, h := range l.vals {
			errs = append(errs, validateHeaderName(p.Child(l.name).Index(i).Child("name"), h.Name)...)
			errs = append(errs, validateHeaderValue(p.Child(l.name).Index(i).Child("value"), h.Value)...)
		}
	}
	for i, n := range hm.Remove {
		errs = append(errs, validateHeaderName(p.Child("remove").Index(i), n)...)
	}
	return errs
}
