package provider

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	fwresource "github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// apiFieldPaths lists the JSON field paths of the struct type t, [] marking
// list elements. It descends into the Gateway API's own types; the types
// of other modules (metav1.LabelSelector) are leaves.
func apiFieldPaths(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) {
			out = append(out, apiFieldPaths(f.Type, prefix)...)
			continue
		}
		p := prefix + name
		out = append(out, p)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		sub := p + "."
		if ft.Kind() == reflect.Slice {
			ft, sub = ft.Elem(), p+"[]."
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
		}
		if ft.Kind() == reflect.Struct && strings.HasPrefix(ft.PkgPath(), "sigs.k8s.io/gateway-api/") {
			out = append(out, apiFieldPaths(ft, sub)...)
		}
	}
	return out
}

// TestGatewayAPIFieldsCovered fails when a field of HTTPRouteSpec or
// GatewaySpec is in neither table (nor under a rejected or not applicable
// entry), or when a table entry names no field: a field a new Gateway API
// version adds must be decided on, supported or rejected, not dropped.
func TestGatewayAPIFieldsCovered(t *testing.T) {
	for _, tc := range []struct {
		kind   string
		typ    reflect.Type
		fields []apiField
	}{
		{"HTTPRoute", reflect.TypeFor[gatewayv1.HTTPRouteSpec](), httpRouteFields},
		{"Gateway", reflect.TypeFor[gatewayv1.GatewaySpec](), gatewayFields},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			entries := map[string]apiField{}
			for _, f := range tc.fields {
				if _, dup := entries[f.Field]; dup {
					t.Errorf("%s: %s is in the table twice", tc.kind, f.Field)
				}
				entries[f.Field] = f
			}
			real := map[string]bool{}
			for _, p := range apiFieldPaths(tc.typ, "") {
				real[p] = true
				if _, ok := entries[p]; ok {
					continue
				}
				covered := false
				for q, e := range entries {
					if e.Support != supported && (strings.HasPrefix(p, q+".") || strings.HasPrefix(p, q+"[].")) {
						covered = true
					}
				}
				if !covered {
					t.Errorf("%s spec.%s (gateway-api %s) is not in the table of provider/gatewayapi_fields.go: support it or reject it", tc.kind, p, GatewayAPIVersion)
				}
			}
			for p := range entries {
				if !real[p] {
					t.Errorf("%s: the table has %s, which gateway-api %s does not", tc.kind, p, GatewayAPIVersion)
				}
			}
		})
	}
}

// schemaPath is the path of a table's Attr (rule.backend_ref.filter) in s,
// with index 0 for every list block.
func schemaPath(ctx context.Context, s schema.Schema, attr string) (path.Path, error) {
	var p path.Path
	for i, name := range strings.Split(attr, ".") {
		if i == 0 {
			p = path.Root(name)
		} else {
			p = p.AtName(name)
		}
		typ, d := s.TypeAtPath(ctx, p)
		if d.HasError() {
			return p, fmt.Errorf("%s: %v", p, d)
		}
		if l, ok := typ.(types.ListType); ok {
			if _, ok := l.ElemType.(types.ObjectType); ok {
				p = p.AtListIndex(0)
			}
		}
	}
	return p, nil
}

// describe is the description of the argument or block at attr in s.
func describe(s schema.Schema, attr string) string {
	attrs, blocks := s.Attributes, s.Blocks
	names := strings.Split(attr, ".")
	for i, n := range names {
		last := i == len(names)-1
		if a, ok := attrs[n]; ok && last {
			return a.GetDescription()
		}
		b, ok := blocks[n]
		if !ok {
			return ""
		}
		if last {
			return b.GetDescription()
		}
		attrs, blocks = map[string]schema.Attribute{}, map[string]schema.Block{}
		for k, v := range b.GetNestedObject().GetAttributes() {
			attrs[k] = v.(schema.Attribute)
		}
		for k, v := range b.GetNestedObject().GetBlocks() {
			blocks[k] = v.(schema.Block)
		}
	}
	return ""
}

// TestGatewayAPIFieldsInSchema: every Attr of the tables is an argument
// or block of the resource, and a rejected field's description says it is
// not supported yet.
func TestGatewayAPIFieldsInSchema(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		res    fwresource.Resource
		fields []apiField
	}{
		{NewHTTPRouteResource(), httpRouteFields},
		{NewGatewayResource(), gatewayFields},
	} {
		var s fwresource.SchemaResponse
		tc.res.Schema(ctx, fwresource.SchemaRequest{}, &s)
		for _, f := range tc.fields {
			if f.Attr == "" {
				if f.Support != notApplicable {
					t.Errorf("%s: %s has no argument", f.Field, f.Support)
				}
				continue
			}
			if _, err := schemaPath(ctx, s.Schema, f.Attr); err != nil {
				t.Errorf("%s: %s is not in the schema: %v", f.Field, f.Attr, err)
				continue
			}
			if f.Support != rejected {
				continue
			}
			desc := describe(s.Schema, f.Attr)
			if !strings.HasPrefix(desc, "Not supported yet: ") {
				t.Errorf("%s (%s) is rejected but its description does not say so: %q", f.Attr, f.Field, desc)
			}
		}
	}
}

// TestGatewayAPIFieldsDocumented: the decision tables of the resource
// documentation are the tables of gatewayapi_fields.go.
func TestGatewayAPIFieldsDocumented(t *testing.T) {
	for _, tc := range []struct {
		template string
		fields   []apiField
	}{
		{"../templates/resources/http_route.md.tmpl", httpRouteFields},
		{"../templates/resources/gateway.md.tmpl", gatewayFields},
	} {
		b, err := os.ReadFile(tc.template)
		if err != nil {
			t.Fatal(err)
		}
		if want := decisionTable(tc.fields); !strings.Contains(string(b), want) {
			t.Errorf("%s does not have the decision table of provider/gatewayapi_fields.go; it should contain:\n%s", tc.template, want)
		}
	}
}

// decisionTable is the Markdown table of fields.
func decisionTable(fields []apiField) string {
	var b strings.Builder
	b.WriteString("| Gateway API field (spec.) | argument or block | varnishgw | notes |\n| --- | --- | --- | --- |\n")
	for _, f := range fields {
		attr := "-"
		if f.Attr != "" {
			attr = "`" + f.Attr + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.Field, attr, f.Support, f.Note)
	}
	return b.String()
}

// rejectedExamples set each rejected field in a configuration: the
// resource ("route" or "gateway"), what is added to a valid resource body,
// the line the CLI must show and the message.
var rejectedExamples = map[string]struct{ res, body, line, want string }{
	"use_default_gateways": {"route", `use_default_gateways = "All"`, `use_default_gateways = "All"`,
		`use_default_gateways = "All" is not supported yet: varnishgw Gateways are not default Gateways`},
	"rule.filter.external_auth": {"route", `rule {
    filter {
      type = "ExternalAuth"
      external_auth {
        protocol = "HTTP"
        backend_ref {
          name = "auth"
          port = 80
        }
      }
    }
  }`, `type = "ExternalAuth"`, `rule\[0\]\.filter\[0\]\.type: Invalid value: "ExternalAuth": ExternalAuth filters are not supported yet`},
	"rule.filter.extension_ref": {"route", `rule {
    filter {
      type = "ExtensionRef"
      extension_ref {
        group = "example.com"
        kind  = "Thing"
        name  = "x"
      }
    }
  }`, `type = "ExtensionRef"`, `rule\[0\]\.filter\[0\]\.type: Invalid value: "ExtensionRef": ExtensionRef filters are not supported`},
	"rule.backend_ref.filter.response_header_modifier": {"route", `rule {
    backend_ref {
      name = "web"
      port = 80
      filter {
        type = "ResponseHeaderModifier"
        response_header_modifier {
          remove = ["server"]
        }
      }
    }
  }`, `type = "ResponseHeaderModifier"`, `rule\[0\]\.backend_ref\[0\]\.filter\[0\]\.type: Invalid value: "ResponseHeaderModifier": not supported on a backendRef, which may have RequestHeaderModifier filters only: move this filter to the rule`},
	"rule.backend_ref.filter.request_redirect": {"route", `rule {
    backend_ref {
      name = "web"
      port = 80
      filter {
        type = "RequestRedirect"
        request_redirect {
          status_code = 301
        }
      }
    }
  }`, `type = "RequestRedirect"`, `rule\[0\]\.backend_ref\[0\]\.filter\[0\]\.type: Invalid value: "RequestRedirect": not supported on a backendRef, which may have RequestHeaderModifier filters only: move this filter to the rule`},
	"rule.backend_ref.filter.url_rewrite": {"route", `rule {
    backend_ref {
      name = "web"
      port = 80
      filter {
        type = "URLRewrite"
        url_rewrite {
          hostname = "in.example.com"
        }
      }
    }
  }`, `type = "URLRewrite"`, `rule\[0\]\.backend_ref\[0\]\.filter\[0\]\.type: Invalid value: "URLRewrite": not supported on a backendRef, which may have RequestHeaderModifier filters only: move this filter to the rule`},
	"rule.backend_ref.filter.request_mirror": {"route", `rule {
    backend_ref {
      name = "web"
      port = 80
      filter {
        type = "RequestMirror"
        request_mirror {
          backend_ref {
            name = "shadow"
            port = 80
          }
        }
      }
    }
  }`, `type = "RequestMirror"`, `rule\[0\]\.backend_ref\[0\]\.filter\[0\]\.type: Invalid value: "RequestMirror": not supported on a backendRef, which may have RequestHeaderModifier filters only: move this filter to the rule`},
	"rule.backend_ref.filter.cors": {"route", `rule {
    backend_ref {
      name = "web"
      port = 80
      filter {
        type = "CORS"
        cors {
          allow_origins = ["https://a.example"]
        }
      }
    }
  }`, `type = "CORS"`, `rule\[0\]\.backend_ref\[0\]\.filter\[0\]\.type: Invalid value: "CORS": not supported on a backendRef, which may have RequestHeaderModifier filters only: move this filter to the rule`},
	"rule.backend_ref.filter.external_auth": {"route", `rule {
    backend_ref {
      name = "web"
      port = 80
      filter {
        type = "ExternalAuth"
        external_auth {
          protocol = "HTTP"
          backend_ref {
            name = "auth"
            port = 80
          }
        }
      }
    }
  }`, `type = "ExternalAuth"`, `rule\[0\]\.backend_ref\[0\]\.filter\[0\]\.type: Invalid value: "ExternalAuth": ExternalAuth filters are not supported`},
	"rule.backend_ref.filter.extension_ref": {"route", `rule {
    backend_ref {
      name = "web"
      port = 80
      filter {
        type = "ExtensionRef"
        extension_ref {
          group = "example.com"
          kind  = "Thing"
          name  = "x"
        }
      }
    }
  }`, `type = "ExtensionRef"`, `rule\[0\]\.backend_ref\[0\]\.filter\[0\]\.type: Invalid value: "ExtensionRef": ExtensionRef filters are not supported`},
	"listener.tls.options": {"gateway", `listener {
    name     = "https"
    port     = 8443
    protocol = "HTTPS"
    tls {
      certificate_ref {
        name = "www-cert"
      }
      options = { "example.com/ciphers" = "all" }
    }
  }`, `options = { "example.com/ciphers" = "all" }`, `listener\[1\]\.tls\.options: Forbidden: varnishgw has no implementation-specific TLS options \(got example.com/ciphers\): remove options`},
	"address": {"gateway", `address {
    value = "203.0.113.7"
  }`, `value = "203.0.113.7"`, `address is not supported yet: the gateway's addresses are those of its Service`},
	"tls": {"gateway", `tls {
    backend {
      client_certificate_ref {
        name = "client"
      }
    }
  }`, `name = "client"`, `tls is not supported yet: the gateway's TLS settings are TLS to backends, which Varnish Cache does not have`},
	"default_scope": {"gateway", `default_scope = "All"`, `default_scope = "All"`, `default_scope = "All" is not supported yet`},
}

// TestAccGatewayAPIFieldsRejected: setting a rejected field fails the plan
// with one error, on its line, that says what to do.
func TestAccGatewayAPIFieldsRejected(t *testing.T) {
	for _, f := range append(append([]apiField{}, httpRouteFields...), gatewayFields...) {
		if _, ok := rejectedExamples[f.Attr]; f.Support == rejected && !ok {
			t.Errorf("no example sets the rejected %s (%s)", f.Attr, f.Field)
		}
	}
	cp := accPreCheck(t)
	for attr, ex := range rejectedExamples {
		t.Run(attr, func(t *testing.T) {
			config := providerBlock(cp)
			switch ex.res {
			case "route":
				config += `
resource "varnishgw_http_route" "bad" {
  namespace = "default"
  name      = "bad"
  parent_ref {
    name = "gw"
  }
  ` + ex.body + `
}
`
			case "gateway":
				config += `
resource "varnishgw_gateway" "bad" {
  namespace          = "default"
  name               = "bad"
  gateway_class_name = "c"
  listener {
    name = "http"
    port = 80
  }
  ` + ex.body + `
}
`
			}
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: protoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:      config,
					PlanOnly:    true,
					ExpectError: onlyError(ex.line, ex.want),
				}},
			})
		})
	}
}
