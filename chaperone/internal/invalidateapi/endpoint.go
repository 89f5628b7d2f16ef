// Package invalidateapi serves a gateway pod's invalidation endpoint
// (POST invalidation.Path): a caller authenticated with a Kubernetes token
// for invalidation.Audience, and allowed to create CacheInvalidations in
// the Gateway's namespace, creates one and waits until every Ready pod has
// acknowledged it.
package invalidateapi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/invalidation"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// maxBody bounds a request's body.
const maxBody = 1 << 20

// Defaults of the Endpoint's limits.
const (
	// DefaultMaxReviews is how many requests may be in authentication and
	// authorization (TokenReview, SubjectAccessReview) at once; the next
	// ones answer 429 before any API call.
	DefaultMaxReviews = 8
	// DefaultReviewTTL is how long a token that passed both reviews is
	// taken as reviewed, without asking the API server again.
	DefaultReviewTTL = 10 * time.Second
	// maxCachedReviews bounds the cache of reviews.
	maxCachedReviews = 1024
)

// Endpoint serves POST /invalidate: it authenticates the caller's bearer
// token (TokenReview, audience invalidation.Audience), asks the API server
// whether the caller may create cacheinvalidations in the Gateway's namespace
// (SubjectAccessReview), creates the CacheInvalidation the body describes
// and waits, at most Timeout, until every Ready pod of the Gateway has
// acknowledged it. It then deletes the object (the answer is its record);
// after a timeout the object stays, so that the pods still apply it.
type Endpoint struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	Gateway object.Ref
	Timeout time.Duration
	Logger  *slog.Logger
	// Interval between checks of the acknowledgements (default 100ms).
	Interval time.Duration
	// MaxReviews (default DefaultMaxReviews) and ReviewTTL (default
	// DefaultReviewTTL; negative: no cache) bound the API server work
	// callers cause.
	MaxReviews int
	ReviewTTL  time.Duration

	once     sync.Once
	sem      chan struct{}
	mu       sync.Mutex
	reviewed map[[sha256.Size]byte]review
	// inReview, when set (tests), runs while a request holds a place in
	// the limit, before its TokenReview.
	inReview func()
}

// review is a token that passed both reviews: its user, until expires.
type review struct {
	user    authenticationv1.UserInfo
	expires time.Time
}

// Handler returns the endpoint's handler.
func (e *Endpoint) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+invalidation.Path, e.serve)
	return mux
}

func (e *Endpoint) log() *slog.Logger {
	if e.Logger == nil {
		return slog.Default()
	}
	return e.Logger
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, invalidation.Response{Error: fmt.Sprintf(format, args...), Applied: []string{}})
}

func (e *Endpoint) serve(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="varnishgw"`)
		fail(w, http.StatusUnauthorized, "send a Kubernetes token issued for the audience %s: Authorization: Bearer $(kubectl create token NAME --audience=%s)", invalidation.Audience, invalidation.Audience)
		return
	}
	user, ok := e.authorize(w, r, strings.TrimSpace(token))
	if !ok {
		return
	}

	var spec vgwapi.InvalidationSpec
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		fail(w, http.StatusBadRequest, "the body is not an invalidation (JSON with purges, bans and tags): %v", err)
		return
	}
	if spec.Gateway == "" {
		spec.Gateway = e.Gateway.Name
	}
	if spec.Gateway != e.Gateway.Name {
		fail(w, http.StatusBadRequest, "gateway = %q: this pod serves Gateway %s; leave gateway out or send the request to that Gateway's pods", spec.Gateway, e.Gateway)
		return
	}
	if err := vgwapi.ValidateInvalidation(&spec); err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	obj, err := vgwapi.NewInvalidation(e.Gateway, "", spec)
	if err != nil {
		fail(w, http.StatusInternalServerError, "%v", err)
		return
	}
	obj.SetAnnotations(map[string]string{invalidation.RequestedByAnnotation: user.Username})
	created, err := e.Dynamic.Resource(vgwapi.CacheInvalidations).Namespace(e.Gateway.Namespace).Create(ctx, obj, metav1.CreateOptions{FieldManager: invalidation.FieldManager})
	if err != nil {
		e.log().Error("invalidation endpoint: cannot create the CacheInvalidation", "user", user.Username, "error", err)
		fail(w, http.StatusServiceUnavailable, "cannot create the CacheInvalidation: %v", err)
		return
	}
	resp := invalidation.Response{Name: created.GetName(), UID: string(created.GetUID()), Applied: []string{}}
	e.log().Info("invalidation endpoint: invalidation created", "user", user.Username, "invalidation", resp.Name)

	timeout := e.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	interval := e.Interval
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	applied, err := vgwapi.WaitAcknowledged(wctx, e.Dynamic, e.Gateway, resp.UID,
		func(ctx context.Context) ([]string, error) { return ReadyPods(ctx, e.Kube, e.Gateway) }, interval)
	var refused *vgwapi.InvalidationError
	var pending *vgwapi.InvalidationPending
	switch {
	case errors.As(err, &refused):
		resp.Error = err.Error()
		writeJSON(w, http.StatusUnprocessableEntity, resp)
		return
	case errors.As(err, &pending):
		resp.Applied = append(resp.Applied, pending.Applied...)
		resp.Pending = pending.Pending
		resp.Error = fmt.Sprintf("%v within %s; the CacheInvalidation %s/%s stays so that they apply it: delete it once they have", err, timeout, e.Gateway.Namespace, resp.Name)
		writeJSON(w, http.StatusGatewayTimeout, resp)
		return
	case err != nil:
		resp.Error = err.Error()
		writeJSON(w, http.StatusInternalServerError, resp)
		return
	}
	resp.Applied = append(resp.Applied, applied...)
	// Every Ready pod applied it: the answer is its record. A pod that
	// starts later has an empty cache.
	if err := e.Dynamic.Resource(vgwapi.CacheInvalidations).Namespace(e.Gateway.Namespace).Delete(context.WithoutCancel(ctx), resp.Name, metav1.DeleteOptions{}); err != nil {
		e.log().Warn("invalidation endpoint: cannot delete the applied CacheInvalidation", "invalidation", resp.Name, "error", err)
	}
	writeJSON(w, http.StatusOK, resp)
}

// authorize returns the user of token when it is valid for
// invalidation.Audience and may create cacheinvalidations in the Gateway's
// namespace, from the cache of reviews or by asking the API server;
// otherwise it answers the request (401, 403, 429 or 503) and returns
// false.
func (e *Endpoint) authorize(w http.ResponseWriter, r *http.Request, token string) (authenticationv1.UserInfo, bool) {
	ctx := r.Context()
	e.once.Do(func() {
		n := e.MaxReviews
		if n <= 0 {
			n = DefaultMaxReviews
		}
		e.sem = make(chan struct{}, n)
		e.reviewed = map[[sha256.Size]byte]review{}
	})
	ttl := e.ReviewTTL
	if ttl == 0 {
		ttl = DefaultReviewTTL
	}
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	e.mu.Lock()
	c, hit := e.reviewed[key]
	e.mu.Unlock()
	if hit && now.Before(c.expires) {
		return c.user, true
	}
	select {
	case e.sem <- struct{}{}:
		defer func() { <-e.sem }()
	default:
		w.Header().Set("Retry-After", "1")
		fail(w, http.StatusTooManyRequests, "%d requests are being authenticated already: retry in a second", cap(e.sem))
		return authenticationv1.UserInfo{}, false
	}
	if e.inReview != nil {
		e.inReview()
	}
	tr, err := e.Kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{invalidation.Audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		e.log().Error("invalidation endpoint: cannot review a token", "error", err)
		fail(w, http.StatusServiceUnavailable, "cannot check the token with the Kubernetes API: %v", err)
		return authenticationv1.UserInfo{}, false
	}
	if !tr.Status.Authenticated || !audienceOK(tr.Status.Audiences) {
		reason := tr.Status.Error
		if tr.Status.Authenticated {
			reason = fmt.Sprintf("the API server found it valid for the audiences %q only", tr.Status.Audiences)
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="varnishgw", error="invalid_token"`)
		fail(w, http.StatusUnauthorized, "the token is not valid for the audience %s (%s): create one with kubectl create token NAME --audience=%s", invalidation.Audience, reason, invalidation.Audience)
		return authenticationv1.UserInfo{}, false
	}
	user := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := e.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: e.Gateway.Namespace, Verb: "create", Group: vgwapi.Group, Resource: vgwapi.CacheInvalidationResource,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.log().Error("invalidation endpoint: cannot authorize a caller", "user", user.Username, "error", err)
		fail(w, http.StatusServiceUnavailable, "cannot check the caller's rights with the Kubernetes API: %v", err)
		return authenticationv1.UserInfo{}, false
	}
	if !sar.Status.Allowed {
		e.log().Warn("invalidation endpoint: caller not allowed", "user", user.Username)
		fail(w, http.StatusForbidden, "%s may not create cacheinvalidations.%s in namespace %s: grant it that right (a Role with verbs [create] on cacheinvalidations)",
			user.Username, vgwapi.Group, e.Gateway.Namespace)
		return authenticationv1.UserInfo{}, false
	}
	if ttl > 0 {
		e.mu.Lock()
		if len(e.reviewed) >= maxCachedReviews {
			for k, v := range e.reviewed {
				if !now.Before(v.expires) || len(e.reviewed) >= maxCachedReviews {
					delete(e.reviewed, k)
				}
			}
		}
		e.reviewed[key] = review{user: user, expires: now.Add(ttl)}
		e.mu.Unlock()
	}
	return user, true
}

// audienceOK reports whether a TokenReview's status.audiences (the
// audiences of the token the authenticator accepted, among those the
// review asked for) holds invalidation.Audience. An authenticator that
// ignores the requested audiences answers none: the token is then one for
// the API server, refused.
func audienceOK(audiences []string) bool {
	return slices.Contains(audiences, invalidation.Audience)
}

// ReadyPods are the Ready, non-terminating pods of gw, sorted: the pods an
// invalidation waits for.
func ReadyPods(ctx context.Context, kube kubernetes.Interface, gw object.Ref) ([]string, error) {
	list, err := kube.CoreV1().Pods(gw.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(gwruntime.Labels(gw)).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list the pods of Gateway %s: %w", gw, err)
	}
	var out []string
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				out = append(out, p.Name)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
