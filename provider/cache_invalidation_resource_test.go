package provider

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

func (p *invalidationPod) banned() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.bans)
}

// TestAccCacheInvalidation: creating the resource creates a
// CacheInvalidation that both Ready pods apply (the bans the contract's
// table gives for the configuration) before the apply returns, and
// applied_pods lists them; a trigger change replaces it and invalidates
// again; a wait setting changes in place without invalidating; invalid
// values fail the plan naming the block; a pod that never acknowledges
// fails the apply at applied_timeout naming it; destroy deletes the
// object.
func TestAccCacheInvalidation(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	gw := routeFixture(t, cp, ns, "")
	gwRef := object.Ref{Namespace: ns, Name: gw}
	pods := []*invalidationPod{
		startInvalidationPod(t, cp, gwRef, gw+"-a", true),
		startInvalidationPod(t, cp, gwRef, gw+"-b", true),
	}
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	const addr = "varnishgw_cache_invalidation.release"
	config := func(release, extra string) string {
		return providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_cache_invalidation" "release" {
  gateway_namespace = %q
  gateway_name      = %q

  purge {
    host = "www.example.com"
    path = "/"
  }
  purge {
    host  = "www.example.com"
    path  = "/search"
    query = "q=cats"
  }
  ban {
    host        = "www.example.com"
    path_prefix = "/assets/v1.2/"
  }
  ban {
    host       = "api.example.com"
    path_regex = "^/v[0-9]+/items$"
  }
  tags = ["product-42"]

  triggers = {
    release = %q
  }
  %s
}
`, ns, gw, release, extra)
	}
	wantBans := [][]string{
		{"obj.http.X-Ghost-Host", "==", "www.example.com", "&&", "obj.http.X-Ghost-Path", "==", "/"},
		{"obj.http.X-Ghost-Host", "==", "www.example.com", "&&", "obj.http.X-Ghost-Url", "==", "/search?q=cats"},
		{"obj.http.X-Ghost-Host", "==", "www.example.com", "&&", "obj.http.X-Ghost-Path", "~", `^/assets/v1\.2/`},
		{"obj.http.X-Ghost-Host", "==", "api.example.com", "&&", "obj.http.X-Ghost-Path", "~", "^/v[0-9]+/items$"},
		{"obj.http.X-Ghost-Tags", "~", `(^|\x20)product-42(\x20|$)`},
	}
	// applied checks that every pod issued the invalidation's bans times
	// times, and acknowledged the stored UID, before the apply returned.
	applied := func(times int) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			rs := s.RootModule().Resources[addr]
			if rs == nil {
				return fmt.Errorf("%s not in state", addr)
			}
			reports, err := vgwapi.ReadReports(context.Background(), dyn, gwRef)
			if err != nil {
				return err
			}
			for _, p := range pods {
				var want [][]string
				for range times {
					want = append(want, wantBans...)
				}
				if got := p.banned(); !slices.EqualFunc(got, want, slices.Equal) {
					return fmt.Errorf("pod %s banned %q, want %q", p.name, got, want)
				}
				if ack := reports[p.name].Invalidation(rs.Primary.Attributes["uid"]); ack == nil || ack.Bans != len(wantBans) {
					return fmt.Errorf("pod %s acknowledged %+v, want %d bans", p.name, ack, len(wantBans))
				}
			}
			return nil
		}
	}
	var firstUID string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			list, err := dyn.Resource(vgwapi.CacheInvalidations).Namespace(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(list.Items) != 0 {
				return fmt.Errorf("%d CacheInvalidations left after destroy", len(list.Items))
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: config("1.2", ""),
				Check: resource.ComposeTestCheckFunc(
					applied(1),
					resource.TestCheckResourceAttr(addr, "applied_pods.#", "2"),
					resource.TestCheckResourceAttr(addr, "applied_pods.0", gw+"-a"),
					resource.TestCheckResourceAttr(addr, "applied_pods.1", gw+"-b"),
					resource.TestMatchResourceAttr(addr, "id", regexp.MustCompile("^"+ns+"/"+gw+"-[a-z0-9]{5}$")),
					func(s *terraform.State) error {
						firstUID = s.RootModule().Resources[addr].Primary.Attributes["uid"]
						return nil
					},
				),
			},
			{
				// A wait setting: in place, no new invalidation.
				Config: config("1.2", `applied_timeout = "30s"`),
				Check:  resource.ComposeTestCheckFunc(applied(1), resource.TestCheckResourceAttr(addr, "applied_timeout", "30s")),
			},
			{
				// A trigger: replaced, invalidated again; the old object is gone.
				Config: config("1.3", `applied_timeout = "30s"`),
				Check: resource.ComposeTestCheckFunc(applied(2), func(s *terraform.State) error {
					if uid := s.RootModule().Resources[addr].Primary.Attributes["uid"]; uid == firstUID {
						return fmt.Errorf("uid %s unchanged: not replaced", uid)
					}
					list, err := dyn.Resource(vgwapi.CacheInvalidations).Namespace(ns).List(context.Background(), metav1.ListOptions{})
					if err != nil || len(list.Items) != 1 {
						return fmt.Errorf("%d CacheInvalidations (%v), want the new one only", len(list.Items), err)
					}
					return nil
				}),
			},
			{
				Config:      strings.Replace(config("1.3", ""), `"^/v[0-9]+/items$"`, `"^/(v)\\1"`, 1),
				ExpectError: regexp.MustCompile(`(?s)ban\[1\]\.path_regex\s+=\s+"\^/\(v\)\\\\1":.*backreference`),
			},
			{
				Config:      strings.Replace(config("1.3", ""), `path  = "/search"`, `path  = "search"`, 1),
				ExpectError: regexp.MustCompile(`(?s)purge\[1\]\.path\s+=\s+"search":\s+want\s+a\s+path\s+starting\s+with\s+"/"`),
			},
			{
				Config:      strings.Replace(config("1.3", ""), `path_prefix = "/assets/v1.2/"`, `path_prefix = "/a"`+"\n"+`path_regex = "^/b"`, 1),
				ExpectError: regexp.MustCompile(`(?s)Invalid Attribute Combination.*path_prefix.*path_regex`),
			},
			{
				// A Ready pod that never acknowledges: the apply fails at
				// applied_timeout naming it.
				PreConfig:   func() { startInvalidationPod(t, cp, gwRef, gw+"-silent", false) },
				Config:      config("1.4", `applied_timeout = "2s"`),
				ExpectError: regexp.MustCompile(`(?s)gateway\s+pods\s+` + gw + `-silent\s+have\s+not\s+acknowledged\s+the\s+cache\s+invalidation\s+within\s+2s.*applied_timeout.*wait_for_applied`),
			},
			{
				// Not waiting.
				Config: config("1.5", "wait_for_applied = false"),
				Check:  resource.TestCheckResourceAttr(addr, "applied_pods.#", "0"),
			},
		},
	})
}
