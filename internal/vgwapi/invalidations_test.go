package vgwapi_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

func str(s string) *string { return &s }

func TestValidateInvalidation(t *testing.T) {
	host := "www.example.com"
	for _, tc := range []struct {
		name    string
		spec    vgwapi.InvalidationSpec
		wantErr string // substring; "" valid
	}{
		{"purge", vgwapi.InvalidationSpec{Gateway: "edge", Purges: []vgwapi.Purge{{Host: host, Path: "/a%20b", Query: str("x=1&y")}}}, ""},
		{"ban and tag", vgwapi.InvalidationSpec{Gateway: "edge", Bans: []vgwapi.Ban{{Host: "10.0.0.1", PathRegex: `^/v/[0-9]+$`}}, Tags: []string{"p-42"}}, ""},
		{"no gateway", vgwapi.InvalidationSpec{Tags: []string{"a"}}, "gateway is empty"},
		{"nothing", vgwapi.InvalidationSpec{Gateway: "edge"}, "nothing to invalidate"},
		{"upper-case host", vgwapi.InvalidationSpec{Gateway: "edge", Purges: []vgwapi.Purge{{Host: "WWW.example.com", Path: "/"}}}, `purges[0].host = "WWW.example.com": want the request's host name in lower case`},
		{"host with port", vgwapi.InvalidationSpec{Gateway: "edge", Purges: []vgwapi.Purge{{Host: "a.com:80", Path: "/"}}}, `purges[0].host = "a.com:80"`},
		{"relative path", vgwapi.InvalidationSpec{Gateway: "edge", Purges: []vgwapi.Purge{{Host: host, Path: "a"}}}, `purges[0].path = "a": want a path starting with "/"`},
		{"path with query", vgwapi.InvalidationSpec{Gateway: "edge", Purges: []vgwapi.Purge{{Host: host, Path: "/a?b"}}}, `purges[0].path = "/a?b"`},
		{"query with fragment", vgwapi.InvalidationSpec{Gateway: "edge", Purges: []vgwapi.Purge{{Host: host, Path: "/", Query: str("a#b")}}}, `purges[0].query = "a#b"`},
		{"ban with both", vgwapi.InvalidationSpec{Gateway: "edge", Bans: []vgwapi.Ban{{Host: host, PathPrefix: "/", PathRegex: "x"}}}, "bans[0] has both pathPrefix"},
		{"ban with neither", vgwapi.InvalidationSpec{Gateway: "edge", Bans: []vgwapi.Ban{{Host: host}}}, "bans[0] has neither pathPrefix nor pathRegex"},
		{"ban regex PCRE2 reads otherwise", vgwapi.InvalidationSpec{Gateway: "edge", Bans: []vgwapi.Ban{{Host: host, PathRegex: `^/(a)\1`}}}, `bans[0].pathRegex = "^/(a)\\1": escape \1`},
		{"ban regex not compiling", vgwapi.InvalidationSpec{Gateway: "edge", Bans: []vgwapi.Ban{{Host: host, PathRegex: `^/(a`}}}, `bans[0].pathRegex`},
		{"tag with space", vgwapi.InvalidationSpec{Gateway: "edge", Tags: []string{"a b"}}, `tags[0] = "a b": want a tag as the origin lists it`},
		{"too many tags", vgwapi.InvalidationSpec{Gateway: "edge", Tags: make([]string, 101)}, "tags has 101 entries, the limit is 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "too many tags" {
				for i := range tc.spec.Tags {
					tc.spec.Tags[i] = "t"
				}
			}
			err := vgwapi.ValidateInvalidation(&tc.spec)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestCacheInvalidationSchema: the API server refuses what the CRD's
// schema refuses (unknown fields, both or neither of pathPrefix and
// pathRegex, an empty invalidation, bad hosts, a changed spec) and keeps
// the rest.
func TestCacheInvalidationSchema(t *testing.T) {
	cp, dyn := clients(t)
	ns := cp.Namespace(t)
	gw := object.Ref{Namespace: ns, Name: "edge"}
	res := dyn.Resource(vgwapi.CacheInvalidations).Namespace(ns)
	ctx := context.Background()
	good, err := vgwapi.NewInvalidation(gw, "", vgwapi.InvalidationSpec{
		Purges: []vgwapi.Purge{{Host: "www.example.com", Path: "/a", Query: str("")}},
		Bans:   []vgwapi.Ban{{Host: "www.example.com", PathPrefix: "/img/"}},
		Tags:   []string{"product-42"},
	})
	if err != nil {
		t.Fatal(err)
	}
	created, err := res.Create(ctx, good, metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatalf("create a valid CacheInvalidation: %v", err)
	}
	spec, err := vgwapi.ReadInvalidation(gw, created)
	if err != nil || spec.Purges[0].Query == nil || *spec.Purges[0].Query != "" || spec.Bans[0].PathPrefix != "/img/" {
		t.Fatalf("ReadInvalidation = %+v, %v", spec, err)
	}
	if !strings.HasPrefix(created.GetName(), "edge-") || created.GetLabels()["varnishgw.dev/gateway"] != "edge" {
		t.Errorf("name %q labels %v, want edge-… labelled for the Gateway", created.GetName(), created.GetLabels())
	}
	created.Object["spec"].(map[string]any)["tags"] = []any{"other"}
	if _, err := res.Update(ctx, created, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "cannot change") {
		t.Errorf("changing the spec: %v, want refused", err)
	}

	for _, tc := range []struct {
		name    string
		spec    map[string]any
		wantErr string
	}{
		{"empty", map[string]any{"gateway": "edge"}, "give at least one purge, ban or tag"},
		{"both prefix and regex", map[string]any{"gateway": "edge", "bans": []any{map[string]any{"host": "a.com", "pathPrefix": "/", "pathRegex": "x"}}}, "exactly one of pathPrefix and pathRegex"},
		{"neither", map[string]any{"gateway": "edge", "bans": []any{map[string]any{"host": "a.com"}}}, "exactly one of pathPrefix and pathRegex"},
		{"unknown field", map[string]any{"gateway": "edge", "tags": []any{"a"}, "purge": []any{}}, `unknown field "spec.purge"`},
		{"host with port", map[string]any{"gateway": "edge", "purges": []any{map[string]any{"host": "a.com:80", "path": "/"}}}, "spec.purges[0].host"},
		{"path without slash", map[string]any{"gateway": "edge", "purges": []any{map[string]any{"host": "a.com", "path": "a"}}}, "spec.purges[0].path"},
		{"tag with space", map[string]any{"gateway": "edge", "tags": []any{"a b"}}, "spec.tags[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{"spec": tc.spec}}
			obj.SetAPIVersion(vgwapi.GroupVersion.String())
			obj.SetKind(vgwapi.CacheInvalidationKind)
			obj.SetGenerateName("bad-")
			_, err := res.Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("create: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestWaitAcknowledgedTimeout checks what a wait that runs out reports: a
// check cut short by the deadline is not "the last check failed", while a
// check that failed on its own still is.
func TestWaitAcknowledgedTimeout(t *testing.T) {
	gw := object.Ref{Namespace: "ns", Name: "edge"}
	for _, tc := range []struct {
		name     string
		failures int // checks that fail on their own before checks block
		wantLast string
	}{
		{"only cut short", 0, ""},
		{"failed, then cut short", 1, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			pods := func(ctx context.Context) ([]string, error) {
				calls++
				if calls <= tc.failures {
					return nil, errors.New("connection refused")
				}
				<-ctx.Done()
				return nil, fmt.Errorf("list the pods: %w", ctx.Err())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err := vgwapi.WaitAcknowledged(ctx, nil, gw, "uid", pods, 10*time.Millisecond)
			var pending *vgwapi.InvalidationPending
			if !errors.As(err, &pending) {
				t.Fatalf("err = %v, want an *InvalidationPending", err)
			}
			got := ""
			if pending.Last != nil {
				got = pending.Last.Error()
			}
			if got != tc.wantLast {
				t.Errorf("Last = %q, want %q (error: %v)", got, tc.wantLast, err)
			}
		})
	}
}
