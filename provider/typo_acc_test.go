package provider

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/provider"
	providerschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	fwresource "github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// typoCase is a configuration with a misspelt argument and a misspelt block
// at one nesting level.
type typoCase struct {
	name         string
	config       string
	arg, block   string // the misspelt names
	argSuggested string // the argument Terraform should suggest
}

// misspell turns name into a name that is not in names: the last letter
// dropped, or an x added.
func misspell(name string, names []string) string {
	typo := name[:len(name)-1]
	if len(name) < 4 || slices.Contains(names, typo) {
		typo = name + "x"
	}
	return typo
}

// typoCases walks a schema level (its argument and block names, and a
// function giving each block's own level) and yields, for this level and
// every block below it, a configuration with a misspelt argument and a
// misspelt block, wrapped in the blocks that lead there.
type level struct {
	attrs  []string
	blocks map[string]func() level
	// noAttrs: the level has blocks only; attrs are their names.
	noAttrs bool
}

func typoCases(prefix string, wrap func(string) string, l level) []typoCase {
	names := append(slices.Clone(l.attrs), slices.Collect(mapKeys(l.blocks))...)
	slices.Sort(l.attrs)
	blockNames := slices.Sorted(mapKeys(l.blocks))
	arg := misspell(l.attrs[0], names)
	block := prefix[strings.LastIndex(prefix, ".")+1:] + "s" // the level's own name, plural: not a block here
	if len(blockNames) > 0 {
		block = misspell(blockNames[0], names)
	}
	if slices.Contains(names, block) {
		block += "x"
	}
	out := []typoCase{{
		name:         prefix,
		config:       wrap(fmt.Sprintf("%s = \"x\"\n%s {\n}\n", arg, block)),
		arg:          arg,
		block:        block,
		argSuggested: l.attrs[0],
	}}
	if l.noAttrs {
		out[0].argSuggested = ""
	}
	for _, b := range blockNames {
		inner := func(s string) string { return wrap(b + " {\n" + s + "}\n") }
		out = append(out, typoCases(prefix+"."+b, inner, l.blocks[b]())...)
	}
	return out
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// resourceLevel is the top level of a resource schema.
func resourceLevel(s schema.Schema) level {
	l := level{blocks: map[string]func() level{}}
	for n, a := range s.Attributes {
		if a.IsRequired() || a.IsOptional() {
			l.attrs = append(l.attrs, n)
		}
	}
	for n, b := range s.Blocks {
		l.blocks[n] = func() level { return blockLevel(b) }
	}
	return l
}

func blockLevel(b schema.Block) level {
	l := level{blocks: map[string]func() level{}}
	for n, a := range b.GetNestedObject().GetAttributes() {
		if a.IsRequired() || a.IsOptional() {
			l.attrs = append(l.attrs, n)
		}
	}
	for n, nb := range b.GetNestedObject().GetBlocks() {
		l.blocks[n] = func() level { return blockLevel(nb.(schema.Block)) }
	}
	if len(l.attrs) == 0 { // a block of blocks (tls): misspell a block name as the argument
		for n := range l.blocks {
			l.attrs = append(l.attrs, n)
		}
		l.noAttrs = true
	}
	return l
}

// TestTypoCasesCoverEveryBlock: the typo cases reach every block of every
// resource.
func TestTypoCasesCoverEveryBlock(t *testing.T) {
	cases := allTypoCases(t)
	var names []string
	for _, c := range cases {
		names = append(names, c.name)
	}
	for _, want := range []string{
		"varnishgw_http_route.rule.filter.request_mirror.backend_ref",
		"varnishgw_http_route.rule.backend_ref.filter.request_header_modifier.set",
		"varnishgw_http_route.rule.match.query_param",
		"varnishgw_gateway.listener.allowed_routes.selector_expression",
		"varnishgw_gateway.pod.toleration",
		"varnishgw_gateway.infrastructure.parameters_ref",
		"varnishgw_gateway.tls.frontend.per_port.tls.validation.ca_certificate_ref",
		"varnishgw_gateway_class",
		"provider.exec",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("no typo case for %s; cases: %v", want, names)
		}
	}
}

// allTypoCases are the typo cases of the provider block and of every
// resource.
func allTypoCases(t *testing.T) []typoCase {
	ctx := context.Background()
	var cases []typoCase
	for _, r := range []struct {
		name string
		res  fwresource.Resource
	}{
		{"varnishgw_gateway_class", NewGatewayClassResource()},
		{"varnishgw_gateway", NewGatewayResource()},
		{"varnishgw_http_route", NewHTTPRouteResource()},
	} {
		var s fwresource.SchemaResponse
		r.res.Schema(ctx, fwresource.SchemaRequest{}, &s)
		if s.Diagnostics.HasError() {
			t.Fatal(s.Diagnostics)
		}
		wrap := func(body string) string { return fmt.Sprintf("resource %q \"typo\" {\n%s}\n", r.name, body) }
		cases = append(cases, typoCases(r.name, wrap, resourceLevel(s.Schema))...)
	}
	var ps provider.SchemaResponse
	New("test")().Schema(ctx, provider.SchemaRequest{}, &ps)
	top := level{blocks: map[string]func() level{}}
	for n := range ps.Schema.Attributes {
		top.attrs = append(top.attrs, n)
	}
	for n, b := range ps.Schema.Blocks {
		sb := b.(providerschema.SingleNestedBlock)
		top.blocks[n] = func() level {
			l := level{blocks: map[string]func() level{}}
			for an := range sb.Attributes {
				l.attrs = append(l.attrs, an)
			}
			return l
		}
	}
	wrap := func(body string) string { return "provider \"varnishgw\" {\n" + body + "}\n" }
	return append(cases, typoCases("provider", wrap, top)...)
}

// TestAccTypos: a misspelt argument and a misspelt block at every nesting
// level of every resource and of the provider block fail the plan, each
// with Terraform's (or OpenTofu's) error naming it, with both CLIs
// (make testacc and make testacc-tofu).
func TestAccTypos(t *testing.T) {
	cp := accPreCheck(t)
	for _, c := range allTypoCases(t) {
		t.Run(c.name, func(t *testing.T) {
			config := providerBlock(cp) + c.config
			if strings.HasPrefix(c.name, "provider") {
				// A resource, so that the CLI decodes the provider block.
				config = c.config + "resource \"varnishgw_gateway_class\" \"c\" {\n  name  = \"typo\"\n  image = \"" + testImage + "\"\n}\n"
			}
			arg := fmt.Sprintf(`An argument named "%s" is not expected here\.`, c.arg)
			if c.argSuggested != "" {
				arg += fmt.Sprintf(`\s+Did you mean\s+"%s"\?`, c.argSuggested)
			}
			block := fmt.Sprintf(`Blocks of type "%s" are not expected here\.`, c.block)
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: protoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:      config,
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(`(?s)(` + arg + `.*` + block + `|` + block + `.*` + arg + `)`),
				}},
			})
		})
	}
}
