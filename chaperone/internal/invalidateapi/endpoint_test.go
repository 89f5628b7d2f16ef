package invalidateapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/invalidation"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// countingTransport counts the requests to the API server whose path
// holds one of the review resources.
type countingTransport struct {
	next                 http.RoundTripper
	tokenReviews, access atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case strings.HasSuffix(r.URL.Path, "/tokenreviews"):
		c.tokenReviews.Add(1)
	case strings.HasSuffix(r.URL.Path, "/subjectaccessreviews"):
		c.access.Add(1)
	}
	return c.next.RoundTrip(r)
}

// endpointFixture is an Endpoint reviewing with the real API server
// through a countingTransport, and a ServiceAccount allowed to create
// cacheinvalidations.
type endpointFixture struct {
	t       *testing.T
	cp      *testenv.ControlPlane
	dyn     dynamic.Interface
	gw      object.Ref
	count   *countingTransport
	ep      *Endpoint
	srv     *httptest.Server
	purger  string // a token of the allowed ServiceAccount for invalidation.Audience
	account string
}

func newEndpointFixture(t *testing.T) *endpointFixture {
	cp := testenv.Get(t)
	if err := vgwapi.EnsureCRDs(t.Context(), apiextensionsclient.NewForConfigOrDie(cp.Config)); err != nil {
		t.Fatal(err)
	}
	f := &endpointFixture{t: t, cp: cp, dyn: dynamic.NewForConfigOrDie(cp.Config),
		gw: object.Ref{Namespace: cp.Namespace(t), Name: "edge"}, count: &countingTransport{}}
	cfg := rest.CopyConfig(f.cp.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { f.count.next = rt; return f.count }
	f.ep = &Endpoint{Kube: kubernetes.NewForConfigOrDie(cfg), Dynamic: f.dyn, Gateway: f.gw}
	f.srv = httptest.NewServer(f.ep.Handler())
	t.Cleanup(f.srv.Close)
	f.account = "purger"
	f.purger = f.token(invalidation.Audience)
	f.cp.GrantRole(t, f.gw.Namespace, "purger", f.gw.Namespace, "purger",
		[]rbacv1.PolicyRule{{APIGroups: []string{vgwapi.Group}, Resources: []string{vgwapi.CacheInvalidationResource}, Verbs: []string{"create"}}})
	return f
}

// token is a real token of the purger ServiceAccount for audiences (the
// API server's when none).
func (f *endpointFixture) token(audiences ...string) string {
	f.t.Helper()
	ctx := context.Background()
	_, _ = f.cp.Client.CoreV1().ServiceAccounts(f.gw.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "purger"}}, metav1.CreateOptions{})
	tr, err := f.cp.Client.CoreV1().ServiceAccounts(f.gw.Namespace).CreateToken(ctx, "purger",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences}}, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return tr.Status.Token
}

// post sends an invalidation body that passes the reviews but is refused
// after them (400: no entry), so nothing is created or waited for.
func (f *endpointFixture) post(token string) *http.Response {
	req, _ := http.NewRequest("POST", f.srv.URL+invalidation.Path, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestEndpointAudience: a token for another audience, or for the API
// server's, is refused with 401; one for invalidation.Audience passes the
// reviews.
func TestEndpointAudience(t *testing.T) {
	f := newEndpointFixture(t)
	for name, tok := range map[string]string{"another audience": f.token("vault"), "the API server's audience": f.token()} {
		if resp := f.post(tok); resp.StatusCode != 401 {
			t.Errorf("a token for %s: %d, want 401", name, resp.StatusCode)
		}
	}
	if resp := f.post(f.purger); resp.StatusCode != 400 {
		t.Errorf("a token for %s: %d, want 400 (reviewed, then the empty body refused)", invalidation.Audience, resp.StatusCode)
	}
}

// TestAudienceOK: the audiences a TokenReview answers must hold
// invalidation.Audience; none means the API server's audience.
func TestAudienceOK(t *testing.T) {
	for _, tc := range []struct {
		audiences []string
		want      bool
	}{
		{nil, false},
		{[]string{}, false},
		{[]string{"https://kubernetes.default.svc"}, false},
		{[]string{invalidation.Audience}, true},
		{[]string{"vault", invalidation.Audience}, true},
	} {
		if got := audienceOK(tc.audiences); got != tc.want {
			t.Errorf("audienceOK(%q) = %v, want %v", tc.audiences, got, tc.want)
		}
	}
}

// TestEndpointReviewCache: a second request with the same token within
// the review TTL makes no second TokenReview or SubjectAccessReview; a
// refused token is not cached; after the TTL the token is reviewed again.
func TestEndpointReviewCache(t *testing.T) {
	f := newEndpointFixture(t)
	f.ep.ReviewTTL = 2 * time.Second
	for i := range 3 {
		if resp := f.post(f.purger); resp.StatusCode != 400 {
			t.Fatalf("request %d: %d, want 400", i, resp.StatusCode)
		}
	}
	if tr, sar := f.count.tokenReviews.Load(), f.count.access.Load(); tr != 1 || sar != 1 {
		t.Errorf("3 requests within the TTL made %d TokenReviews and %d SubjectAccessReviews, want 1 and 1", tr, sar)
	}
	wrong := f.token("vault")
	f.post(wrong)
	f.post(wrong)
	if tr := f.count.tokenReviews.Load(); tr != 3 {
		t.Errorf("a refused token posted twice made %d TokenReviews, want 2 more (not cached)", tr-1)
	}
	time.Sleep(2100 * time.Millisecond)
	f.post(f.purger)
	if tr := f.count.tokenReviews.Load(); tr != 4 {
		t.Errorf("after the TTL: %d TokenReviews, want 4 (reviewed again)", tr)
	}
}

// TestEndpointReviewLimit: with MaxReviews requests held in their reviews
// (a test hook, before the TokenReview), the next one answers 429 with
// Retry-After and causes no API call; once they finish, requests pass
// again.
func TestEndpointReviewLimit(t *testing.T) {
	f := newEndpointFixture(t)
	f.ep.MaxReviews = 3
	f.ep.ReviewTTL = -1 // every request reviews
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(3)
	f.ep.inReview = func() { entered.Done(); <-release }
	var done sync.WaitGroup
	codes := make([]int, 3)
	for i := range 3 {
		done.Add(1)
		go func() { defer done.Done(); codes[i] = f.post(f.purger).StatusCode }()
	}
	entered.Wait()
	resp := f.post(f.purger)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("with the limit full: %d, Retry-After %q, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if n := f.count.tokenReviews.Load(); n != 0 {
		t.Errorf("%d TokenReviews before the held requests went on, want 0", n)
	}
	f.ep.inReview = nil
	close(release)
	done.Wait()
	for i, c := range codes {
		if c != 400 {
			t.Errorf("held request %d: %d, want 400", i, c)
		}
	}
	if resp := f.post(f.purger); resp.StatusCode != 400 {
		t.Errorf("after the held requests: %d, want 400", resp.StatusCode)
	}
}
