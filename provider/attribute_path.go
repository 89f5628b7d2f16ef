package provider

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// fieldNames are the attribute and block names of Gateway API fields whose
// name is not simply their JSON name in snake_case: a repeated field is a
// block with the singular name.
var fieldNames = map[string]string{
	"parentRefs":      "parent_ref",
	"rules":           "rule",
	"matches":         "match",
	"headers":         "header",
	"queryParams":     "query_param",
	"filters":         "filter",
	"backendRefs":     "backend_ref",
	"urlRewrite":      "url_rewrite",
	"listeners":       "listener",
	"kinds":           "kind",
	"addresses":       "address",
	"certificateRefs": "certificate_ref",
}

// fieldRewrites turn Gateway API field paths of objects the provider
// flattens into the flattened form, before the names are mapped: a
// listener's allowed_routes has namespaces (allowedRoutes.namespaces.from)
// and selector (allowedRoutes.namespaces.selector) side by side.
var fieldRewrites = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\.allowedRoutes\.namespaces\.from\b`), ".allowedRoutes.namespaces"},
	{regexp.MustCompile(`\.allowedRoutes\.namespaces\.selector\.matchExpressions`), ".allowedRoutes.selectorExpression"},
	{regexp.MustCompile(`\.allowedRoutes\.namespaces\.selector`), ".allowedRoutes.selector"},
}

var (
	fieldSegment = regexp.MustCompile(`^([A-Za-z]+)((?:\[(?:[0-9]+|\*)\])*)$`)
	fieldIndex   = regexp.MustCompile(`\[([0-9]+|\*)\]`)
	camelHump    = regexp.MustCompile(`([a-z0-9])([A-Z])`)
)

// attributeName is the provider's name of a Gateway API JSON field name.
func attributeName(field string) string {
	if n, ok := fieldNames[field]; ok {
		return n
	}
	return strings.ToLower(camelHump.ReplaceAllString(field, "${1}_${2}"))
}

// attributePath maps a field path of the routing core
// (spec.rules[0].matches[1].headers[0].name) to the path of the attribute
// or block in the resource schema s (rule[0].match[1].header[0].name),
// and that path as text. It stops at the deepest attribute or block the
// schema has, so a field the provider does not model points at its
// parent; a path the schema has nothing of gives path.Empty() and "".
func attributePath(ctx context.Context, s schema.Schema, fp string) (path.Path, string) {
	fp = "." + strings.TrimPrefix(fp, "spec.")
	for _, r := range fieldRewrites {
		fp = r.re.ReplaceAllString(fp, r.with)
	}
	segs := strings.Split(strings.TrimPrefix(fp, "."), ".")
	var p path.Path
	var names []string
	for i, seg := range segs {
		g := fieldSegment.FindStringSubmatch(seg)
		if g == nil {
			break
		}
		name := attributeName(g[1])
		next := path.Root(name)
		if i > 0 {
			next = p.AtName(name)
		}
		if _, d := s.TypeAtPath(ctx, next); d.HasError() {
			break
		}
		text := name
		whole := false
		for _, idx := range fieldIndex.FindAllStringSubmatch(g[2], -1) {
			if idx[1] == "*" {
				whole = true // every element: the list itself
				break
			}
			n, _ := strconv.Atoi(idx[1])
			next = next.AtListIndex(n)
			text += "[" + idx[1] + "]"
		}
		p = next
		names = append(names, text)
		if whole {
			break
		}
	}
	if len(names) == 0 {
		return path.Empty(), ""
	}
	return p, strings.Join(names, ".")
}

// valueAt is the value at p in v, and whether p leads to a value: false
// when a step is missing or crosses a null or unknown value.
func valueAt(v tftypes.Value, p path.Path) (tftypes.Value, bool) {
	for _, step := range p.Steps() {
		if v.IsNull() || !v.IsKnown() {
			return tftypes.Value{}, false
		}
		switch st := step.(type) {
		case path.PathStepAttributeName:
			var m map[string]tftypes.Value
			if err := v.As(&m); err != nil {
				return tftypes.Value{}, false
			}
			next, ok := m[string(st)]
			if !ok {
				return tftypes.Value{}, false
			}
			v = next
		case path.PathStepElementKeyInt:
			var l []tftypes.Value
			if err := v.As(&l); err != nil || int(st) < 0 || int(st) >= len(l) {
				return tftypes.Value{}, false
			}
			v = l[st]
		default:
			return tftypes.Value{}, false
		}
	}
	return v, true
}

// knownAt reports whether the value at p in v is known, nested values
// included.
func knownAt(v tftypes.Value, p path.Path) bool {
	got, ok := valueAt(v, p)
	return ok && got.IsFullyKnown()
}

// insideAbsentBlock reports whether p leads through a block (or object)
// that is null in v: an error about a field of an absent block is the
// business of the validator that requires the block.
func insideAbsentBlock(v tftypes.Value, p path.Path) bool {
	steps := p.Steps()
	for i := range steps {
		parent := path.Empty()
		for _, st := range steps[:i] {
			parent = appendStep(parent, st)
		}
		got, ok := valueAt(v, parent)
		if !ok || got.IsNull() {
			return i > 0
		}
	}
	return false
}

func appendStep(p path.Path, st path.PathStep) path.Path {
	switch s := st.(type) {
	case path.PathStepAttributeName:
		if len(p.Steps()) == 0 {
			return path.Root(string(s))
		}
		return p.AtName(string(s))
	case path.PathStepElementKeyInt:
		return p.AtListIndex(int(s))
	}
	return p
}

// firstArgument is the path of the first argument set inside the block at
// p of the configuration v (depth first, arguments before nested blocks,
// by name), or p when there is none. Terraform shows the line of an
// argument for a diagnostic, and for a block nested in another block the
// block's line, but for a block of the resource itself only the
// resource's first line: an error about such a block points at an
// argument in it.
func firstArgument(v tftypes.Value, p path.Path) path.Path {
	got, ok := valueAt(v, p)
	if !ok || got.IsNull() || !got.IsKnown() {
		return p
	}
	switch {
	case got.Type().Is(tftypes.List{}):
		var elems []tftypes.Value
		if err := got.As(&elems); err != nil || len(elems) == 0 {
			return p
		}
		return firstArgument(v, p.AtListIndex(0))
	case got.Type().Is(tftypes.Object{}):
		var attrs map[string]tftypes.Value
		if err := got.As(&attrs); err != nil {
			return p
		}
		var blocks []string
		for _, name := range slices.Sorted(maps.Keys(attrs)) {
			a := attrs[name]
			if a.IsNull() {
				continue
			}
			if isBlockValue(a) {
				blocks = append(blocks, name)
				continue
			}
			return p.AtName(name)
		}
		for _, name := range blocks {
			if q := firstArgument(v, p.AtName(name)); !q.Equal(p.AtName(name)) {
				return q
			}
		}
	}
	return p
}

// isBlockValue reports whether a configuration value is a block's: an
// object, or a list of objects.
func isBlockValue(v tftypes.Value) bool {
	t := v.Type()
	if l, ok := t.(tftypes.List); ok {
		t = l.ElementType
	}
	return t.Is(tftypes.Object{})
}

// diagnosticPath is p, or for a block of the resource itself (or one
// element of it) the first argument set in it: see firstArgument.
func diagnosticPath(config tftypes.Value, p path.Path) path.Path {
	steps := p.Steps()
	if len(steps) == 0 || len(steps) > 2 {
		return p
	}
	if len(steps) == 2 {
		if _, ok := steps[1].(path.PathStepElementKeyInt); !ok {
			return p
		}
	}
	if v, ok := valueAt(config, p); ok && isBlockValue(v) {
		return firstArgument(config, p)
	}
	return p
}
