package routing

import (
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
)

// The stored fragment format, version FragmentVersion: the JSON that
// MarshalFragment writes into RoutingFragments and UnmarshalFragment reads
// back. The format has types of its own, which nothing else uses, so that
// a change to the types the merge works on (Fragment, and the ghostjson
// and Gateway API types it holds) cannot change what clusters store: such
// a change fails to build here, or fails TestFragmentFormatRoundTrip
// until the conversions below carry it, and a change of these types fails
// TestFragmentFormatJSON (testdata/fragment-v1.json) and the golden
// translation tests (testdata/golden/*/fragments.yaml). A change of the
// stored JSON is a new FragmentVersion.
//
// Field order and omitempty decide the bytes: they are those of the
// format, not to be tidied.

// fragmentV1 is a stored Fragment.
type fragmentV1 struct {
	Version   int                  `json:"version"`
	Gateway   objectRefV1          `json:"gateway"`
	Route     routeRefV1           `json:"route"`
	Parents   []parentStatusV1     `json:"parents"`
	Listeners []attachedListenerV1 `json:"listeners"`
	Rules     []ruleV1             `json:"rules"`
}

// objectRefV1 is a stored object.Ref.
type objectRefV1 struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// routeRefV1 is a stored RouteRef.
type routeRefV1 struct {
	Namespace         string    `json:"namespace"`
	Name              string    `json:"name"`
	UID               string    `json:"uid,omitempty"`
	Generation        int64     `json:"generation,omitempty"`
	CreationTimestamp time.Time `json:"creationTimestamp"`
}

// parentStatusV1 is a stored ParentStatus.
type parentStatusV1 struct {
	ParentRef  parentRefV1   `json:"parentRef"`
	Conditions []conditionV1 `json:"conditions"`
}

// parentRefV1 is a stored Gateway API ParentReference.
type parentRefV1 struct {
	Group       *string `json:"group,omitempty"`
	Kind        *string `json:"kind,omitempty"`
	Namespace   *string `json:"namespace,omitempty"`
	Name        string  `json:"name"`
	SectionName *string `json:"sectionName,omitempty"`
	Port        *int32  `json:"port,omitempty"`
}

// conditionV1 is a stored Condition.
type conditionV1 struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// attachedListenerV1 is a stored AttachedListener.
type attachedListenerV1 struct {
	Name      string   `json:"name"`
	Port      int32    `json:"port"`
	Hostnames []string `json:"hostnames"`
}

// ruleV1 is a stored Rule.
type ruleV1 struct {
	Index              int                   `json:"index"`
	Name               string                `json:"name,omitempty"`
	Matches            []matchV1             `json:"matches"`
	Filters            []filterV1            `json:"filters,omitempty"`
	Timeouts           *timeoutsV1           `json:"timeouts,omitempty"`
	Retry              *retryV1              `json:"retry,omitempty"`
	Backends           []backendRefV1        `json:"backends,omitempty"`
	Cache              *cachePolicyV1        `json:"cache,omitempty"`
	SessionPersistence *sessionPersistenceV1 `json:"sessionPersistence,omitempty"`
}

// matchV1 is a stored ghostjson.Match.
type matchV1 struct {
	Path        pathMatchV1    `json:"path"`
	Method      string         `json:"method,omitempty"`
	Headers     []valueMatchV1 `json:"headers,omitempty"`
	QueryParams []valueMatchV1 `json:"queryParams,omitempty"`
}

// pathMatchV1 is a stored ghostjson.PathMatch.
type pathMatchV1 struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// valueMatchV1 is a stored ghostjson.ValueMatch.
type valueMatchV1 struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Value string `json:"value"`
}

// timeoutsV1 is a stored ghostjson.Timeouts.
type timeoutsV1 struct {
	RequestMs        int64 `json:"requestMs,omitempty"`
	BackendRequestMs int64 `json:"backendRequestMs,omitempty"`
}

// retryV1 is a stored ghostjson.Retry.
type retryV1 struct {
	Attempts  int   `json:"attempts"`
	BackoffMs int64 `json:"backoffMs,omitempty"`
	Codes     []int `json:"codes,omitempty"`
}

// filterV1 is a stored Filter.
type filterV1 struct {
	Type                   string            `json:"type"`
	RequestHeaderModifier  *headerModifierV1 `json:"requestHeaderModifier,omitempty"`
	ResponseHeaderModifier *headerModifierV1 `json:"responseHeaderModifier,omitempty"`
	RequestRedirect        *redirectV1       `json:"requestRedirect,omitempty"`
	URLRewrite             *rewriteV1        `json:"urlRewrite,omitempty"`
	RequestMirror          *mirrorRefV1      `json:"requestMirror,omitempty"`
	CORS                   *corsV1           `json:"cors,omitempty"`
}

// headerModifierV1 is a stored ghostjson.HeaderModifier.
type headerModifierV1 struct {
	Set    []headerValueV1 `json:"set,omitempty"`
	Add    []headerValueV1 `json:"add,omitempty"`
	Remove []string        `json:"remove,omitempty"`
}

// headerValueV1 is a stored ghostjson.HeaderValue.
type headerValueV1 struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// pathModifierV1 is a stored ghostjson.PathModifier.
type pathModifierV1 struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// redirectV1 is a stored ghostjson.Redirect.
type redirectV1 struct {
	Scheme     string          `json:"scheme,omitempty"`
	Hostname   string          `json:"hostname,omitempty"`
	Port       int32           `json:"port,omitempty"`
	Path       *pathModifierV1 `json:"path,omitempty"`
	StatusCode int             `json:"statusCode,omitempty"`
}

// rewriteV1 is a stored ghostjson.Rewrite.
type rewriteV1 struct {
	Hostname string          `json:"hostname,omitempty"`
	Path     *pathModifierV1 `json:"path,omitempty"`
}

// mirrorRefV1 is a stored MirrorRef.
type mirrorRefV1 struct {
	Backend backendRefV1 `json:"backend"`
	Percent *int32       `json:"percent,omitempty"`
}

// corsV1 is a stored ghostjson.CORS.
type corsV1 struct {
	AllowOrigins     []string `json:"allowOrigins,omitempty"`
	AllowMethods     []string `json:"allowMethods,omitempty"`
	AllowHeaders     []string `json:"allowHeaders,omitempty"`
	ExposeHeaders    []string `json:"exposeHeaders,omitempty"`
	AllowCredentials bool     `json:"allowCredentials,omitempty"`
	MaxAge           int32    `json:"maxAge,omitempty"`
}

// backendRefV1 is a stored BackendRef.
type backendRefV1 struct {
	Namespace  string     `json:"namespace"`
	Name       string     `json:"name"`
	Port       int32      `json:"port"`
	Weight     int32      `json:"weight"`
	Unresolved string     `json:"unresolved,omitempty"`
	Filters    []filterV1 `json:"filters,omitempty"`
}

// cachePolicyV1 is a stored CachePolicy (a rule's own).
type cachePolicyV1 struct {
	Enabled                *bool     `json:"enabled,omitempty"`
	TTL                    *string   `json:"ttl,omitempty"`
	ForceTTL               *bool     `json:"forceTtl,omitempty"`
	Grace                  *string   `json:"grace,omitempty"`
	Keep                   *string   `json:"keep,omitempty"`
	QueryParametersInclude *[]string `json:"queryParametersInclude,omitempty"`
	QueryParametersExclude *[]string `json:"queryParametersExclude,omitempty"`
	KeyHeaders             *[]string `json:"keyHeaders,omitempty"`
	StripCookies           *[]string `json:"stripCookies,omitempty"`
	AllowAuthorization     *bool     `json:"allowAuthorization,omitempty"`
	TagHeader              *string   `json:"tagHeader,omitempty"`
	StatusHeader           *string   `json:"statusHeader,omitempty"`
}

// sessionPersistenceV1 is a stored SessionPersistence.
type sessionPersistenceV1 struct {
	Type              string `json:"type"`
	SessionName       string `json:"sessionName"`
	AbsoluteTimeoutMs int64  `json:"absoluteTimeoutMs,omitempty"`
	Permanent         bool   `json:"permanent,omitempty"`
}

// convertSlice converts every element of in with f; nil stays nil and
// empty stays empty, as the JSON tells null from [].
func convertSlice[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

// convertPtr converts *in with f; nil stays nil.
func convertPtr[T, U any](in *T, f func(T) U) *U {
	if in == nil {
		return nil
	}
	out := f(*in)
	return &out
}

// clonePtr is a new pointer to a copy of *in; nil stays nil.
func clonePtr[T any](in *T) *T {
	return convertPtr(in, func(v T) T { return v })
}

// toStringPtr converts a pointer to a string type to *string.
func toStringPtr[S ~string](in *S) *string {
	return convertPtr(in, func(s S) string { return string(s) })
}

// fromStringPtr converts a *string to a pointer to the string type S.
func fromStringPtr[S ~string](in *string) *S {
	return convertPtr(in, func(s string) S { return S(s) })
}

// fragmentToV1 is f in the stored format.
func fragmentToV1(f *Fragment) *fragmentV1 {
	return &fragmentV1{
		Version: f.Version,
		Gateway: objectRefV1(f.Gateway),
		Route:   routeRefV1(f.Route),
		Parents: convertSlice(f.Parents, func(p ParentStatus) parentStatusV1 {
			return parentStatusV1{
				ParentRef: parentRefV1{
					Group:       toStringPtr(p.ParentRef.Group),
					Kind:        toStringPtr(p.ParentRef.Kind),
					Namespace:   toStringPtr(p.ParentRef.Namespace),
					Name:        string(p.ParentRef.Name),
					SectionName: toStringPtr(p.ParentRef.SectionName),
					Port:        clonePtr(p.ParentRef.Port),
				},
				Conditions: convertSlice(p.Conditions, func(c Condition) conditionV1 { return conditionV1(c) }),
			}
		}),
		Listeners: convertSlice(f.Listeners, func(l AttachedListener) attachedListenerV1 { return attachedListenerV1(l) }),
		Rules:     convertSlice(f.Rules, ruleToV1),
	}
}

// fragment is the stored fragment v as the merge reads it.
func (v *fragmentV1) fragment() *Fragment {
	return &Fragment{
		Version: v.Version,
		Gateway: object.Ref(v.Gateway),
		Route:   RouteRef(v.Route),
		Parents: convertSlice(v.Parents, func(p parentStatusV1) ParentStatus {
			return ParentStatus{
				ParentRef: gatewayv1.ParentReference{
					Group:       fromStringPtr[gatewayv1.Group](p.ParentRef.Group),
					Kind:        fromStringPtr[gatewayv1.Kind](p.ParentRef.Kind),
					Namespace:   fromStringPtr[gatewayv1.Namespace](p.ParentRef.Namespace),
					Name:        gatewayv1.ObjectName(p.ParentRef.Name),
					SectionName: fromStringPtr[gatewayv1.SectionName](p.ParentRef.SectionName),
					Port:        clonePtr(p.ParentRef.Port),
				},
				Conditions: convertSlice(p.Conditions, func(c conditionV1) Condition { return Condition(c) }),
			}
		}),
		Listeners: convertSlice(v.Listeners, func(l attachedListenerV1) AttachedListener { return AttachedListener(l) }),
		Rules:     convertSlice(v.Rules, ruleFromV1),
	}
}

func ruleToV1(r Rule) ruleV1 {
	return ruleV1{
		Index: r.Index,
		Name:  r.Name,
		Matches: convertSlice(r.Matches, func(m ghostjson.Match) matchV1 {
			return matchV1{
				Path:        pathMatchV1(m.Path),
				Method:      m.Method,
				Headers:     convertSlice(m.Headers, func(v ghostjson.ValueMatch) valueMatchV1 { return valueMatchV1(v) }),
				QueryParams: convertSlice(m.QueryParams, func(v ghostjson.ValueMatch) valueMatchV1 { return valueMatchV1(v) }),
			}
		}),
		Filters:            convertSlice(r.Filters, filterToV1),
		Timeouts:           convertPtr(r.Timeouts, func(t ghostjson.Timeouts) timeoutsV1 { return timeoutsV1(t) }),
		Retry:              convertPtr(r.Retry, func(rt ghostjson.Retry) retryV1 { return retryV1(rt) }),
		Backends:           convertSlice(r.Backends, backendRefToV1),
		Cache:              convertPtr(r.Cache, func(c CachePolicy) cachePolicyV1 { return cachePolicyV1(c) }),
		SessionPersistence: convertPtr(r.SessionPersistence, func(s SessionPersistence) sessionPersistenceV1 { return sessionPersistenceV1(s) }),
	}
}

func ruleFromV1(r ruleV1) Rule {
	return Rule{
		Index: r.Index,
		Name:  r.Name,
		Matches: convertSlice(r.Matches, func(m matchV1) ghostjson.Match {
			return ghostjson.Match{
				Path:        ghostjson.PathMatch(m.Path),
				Method:      m.Method,
				Headers:     convertSlice(m.Headers, func(v valueMatchV1) ghostjson.ValueMatch { return ghostjson.ValueMatch(v) }),
				QueryParams: convertSlice(m.QueryParams, func(v valueMatchV1) ghostjson.ValueMatch { return ghostjson.ValueMatch(v) }),
			}
		}),
		Filters:            convertSlice(r.Filters, filterFromV1),
		Timeouts:           convertPtr(r.Timeouts, func(t timeoutsV1) ghostjson.Timeouts { return ghostjson.Timeouts(t) }),
		Retry:              convertPtr(r.Retry, func(rt retryV1) ghostjson.Retry { return ghostjson.Retry(rt) }),
		Backends:           convertSlice(r.Backends, backendRefFromV1),
		Cache:              convertPtr(r.Cache, func(c cachePolicyV1) CachePolicy { return CachePolicy(c) }),
		SessionPersistence: convertPtr(r.SessionPersistence, func(s sessionPersistenceV1) SessionPersistence { return SessionPersistence(s) }),
	}
}

func filterToV1(f Filter) filterV1 {
	return filterV1{
		Type:                   f.Type,
		RequestHeaderModifier:  convertPtr(f.RequestHeaderModifier, headerModifierToV1),
		ResponseHeaderModifier: convertPtr(f.ResponseHeaderModifier, headerModifierToV1),
		RequestRedirect: convertPtr(f.RequestRedirect, func(r ghostjson.Redirect) redirectV1 {
			return redirectV1{
				Scheme: r.Scheme, Hostname: r.Hostname, Port: r.Port, StatusCode: r.StatusCode,
				Path: convertPtr(r.Path, func(p ghostjson.PathModifier) pathModifierV1 { return pathModifierV1(p) }),
			}
		}),
		URLRewrite: convertPtr(f.URLRewrite, func(r ghostjson.Rewrite) rewriteV1 {
			return rewriteV1{
				Hostname: r.Hostname,
				Path:     convertPtr(r.Path, func(p ghostjson.PathModifier) pathModifierV1 { return pathModifierV1(p) }),
			}
		}),
		RequestMirror: convertPtr(f.RequestMirror, func(m MirrorRef) mirrorRefV1 {
			return mirrorRefV1{Backend: backendRefToV1(m.Backend), Percent: clonePtr(m.Percent)}
		}),
		CORS: convertPtr(f.CORS, func(c ghostjson.CORS) corsV1 { return corsV1(c) }),
	}
}

func filterFromV1(f filterV1) Filter {
	return Filter{
		Type:                   f.Type,
		RequestHeaderModifier:  convertPtr(f.RequestHeaderModifier, headerModifierFromV1),
		ResponseHeaderModifier: convertPtr(f.ResponseHeaderModifier, headerModifierFromV1),
		RequestRedirect: convertPtr(f.RequestRedirect, func(r redirectV1) ghostjson.Redirect {
			return ghostjson.Redirect{
				Scheme: r.Scheme, Hostname: r.Hostname, Port: r.Port, StatusCode: r.StatusCode,
				Path: convertPtr(r.Path, func(p pathModifierV1) ghostjson.PathModifier { return ghostjson.PathModifier(p) }),
			}
		}),
		URLRewrite: convertPtr(f.URLRewrite, func(r rewriteV1) ghostjson.Rewrite {
			return ghostjson.Rewrite{
				Hostname: r.Hostname,
				Path:     convertPtr(r.Path, func(p pathModifierV1) ghostjson.PathModifier { return ghostjson.PathModifier(p) }),
			}
		}),
		RequestMirror: convertPtr(f.RequestMirror, func(m mirrorRefV1) MirrorRef {
			return MirrorRef{Backend: backendRefFromV1(m.Backend), Percent: clonePtr(m.Percent)}
		}),
		CORS: convertPtr(f.CORS, func(c corsV1) ghostjson.CORS { return ghostjson.CORS(c) }),
	}
}

func headerModifierToV1(h ghostjson.HeaderModifier) headerModifierV1 {
	return headerModifierV1{
		Set:    convertSlice(h.Set, func(v ghostjson.HeaderValue) headerValueV1 { return headerValueV1(v) }),
		Add:    convertSlice(h.Add, func(v ghostjson.HeaderValue) headerValueV1 { return headerValueV1(v) }),
		Remove: h.Remove,
	}
}

func headerModifierFromV1(h headerModifierV1) ghostjson.HeaderModifier {
	return ghostjson.HeaderModifier{
		Set:    convertSlice(h.Set, func(v headerValueV1) ghostjson.HeaderValue { return ghostjson.HeaderValue(v) }),
		Add:    convertSlice(h.Add, func(v headerValueV1) ghostjson.HeaderValue { return ghostjson.HeaderValue(v) }),
		Remove: h.Remove,
	}
}

func backendRefToV1(b BackendRef) backendRefV1 {
	return backendRefV1{
		Namespace: b.Namespace, Name: b.Name, Port: b.Port, Weight: b.Weight, Unresolved: b.Unresolved,
		Filters: convertSlice(b.Filters, filterToV1),
	}
}

func backendRefFromV1(b backendRefV1) BackendRef {
	return BackendRef{
		Namespace: b.Namespace, Name: b.Name, Port: b.Port, Weight: b.Weight, Unresolved: b.Unresolved,
		Filters: convertSlice(b.Filters, filterFromV1),
	}
}
