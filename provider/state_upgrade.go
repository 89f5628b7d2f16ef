package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// Upgrading stored state from schema version 0, where nested objects were
// nested attributes (parent_refs = [{ ... }]), to version 1, where they are
// blocks (parent_ref { ... }). A block holds the same values as the nested
// attribute it replaces, under its singular name, so the upgrade copies
// every value: renamed holds the version 0 name of each renamed argument or
// block, and what version 0 did not have (the arguments of fields that were
// not modelled) is null, or an empty list for a list block.

// upgradeRule adjusts one object of the new schema after its values were
// copied, for a value version 0 stored that version 1 represents
// differently. at is the block's name.
type upgradeRule func(at string, obj map[string]tftypes.Value) map[string]tftypes.Value

// upgradeState converts old, a stored object of the prior schema, to the
// object type of s.
func upgradeState(ctx context.Context, old tftypes.Value, s schema.Schema, renamed map[string]string, rule upgradeRule) (tftypes.Value, error) {
	typ := s.Type().TerraformType(ctx)
	obj, err := upgradeObject(ctx, old, "", s.Attributes, s.Blocks, renamed, rule)
	if err != nil {
		return tftypes.Value{}, err
	}
	if obj == nil {
		return tftypes.NewValue(typ, nil), nil
	}
	v := tftypes.NewValue(typ, obj)
	return v, nil
}

// upgradeObject converts the object old (nil map when null) to the
// attributes and blocks given.
func upgradeObject(ctx context.Context, old tftypes.Value, at string, attrs map[string]schema.Attribute, blocks map[string]schema.Block,
	renamed map[string]string, rule upgradeRule) (map[string]tftypes.Value, error) {
	if old.IsNull() {
		return nil, nil
	}
	var src map[string]tftypes.Value
	if err := old.As(&src); err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	lookup := func(name string) (tftypes.Value, bool) {
		if o, ok := renamed[name]; ok {
			if v, ok := src[o]; ok {
				return v, true
			}
		}
		v, ok := src[name]
		return v, ok
	}
	out := map[string]tftypes.Value{}
	for name, a := range attrs {
		typ := a.GetType().TerraformType(ctx)
		v, ok := lookup(name)
		if !ok {
			out[name] = tftypes.NewValue(typ, nil)
			continue
		}
		if !v.Type().Equal(typ) {
			return nil, fmt.Errorf("%s.%s: stored as %s, want %s", at, name, v.Type(), typ)
		}
		out[name] = v
	}
	for name, b := range blocks {
		typ := b.Type().TerraformType(ctx)
		v, ok := lookup(name)
		if !ok {
			v = tftypes.NewValue(tftypes.DynamicPseudoType, nil)
		}
		nested := b.GetNestedObject()
		nattrs := map[string]schema.Attribute{}
		for k, a := range nested.GetAttributes() {
			nattrs[k] = a.(schema.Attribute)
		}
		nblocks := map[string]schema.Block{}
		for k, nb := range nested.GetBlocks() {
			nblocks[k] = nb.(schema.Block)
		}
		objType := nested.Type().TerraformType(ctx)
		switch b.(type) {
		case schema.SingleNestedBlock:
			o, err := upgradeObject(ctx, v, name, nattrs, nblocks, renamed, rule)
			if err != nil {
				return nil, err
			}
			if o != nil && rule != nil {
				o = rule(name, o)
			}
			if o == nil {
				out[name] = tftypes.NewValue(typ, nil)
			} else {
				out[name] = tftypes.NewValue(objType, o)
			}
		case schema.ListNestedBlock:
			var elems []tftypes.Value
			if !v.IsNull() {
				if err := v.As(&elems); err != nil {
					return nil, fmt.Errorf("%s.%s: %w", at, name, err)
				}
			}
			list := []tftypes.Value{}
			for _, e := range elems {
				o, err := upgradeObject(ctx, e, name, nattrs, nblocks, renamed, rule)
				if err != nil {
					return nil, err
				}
				if o == nil {
					continue // a null element: a block cannot be null
				}
				if rule != nil {
					o = rule(name, o)
				}
				list = append(list, tftypes.NewValue(objType, o))
			}
			out[name] = tftypes.NewValue(typ, list)
		default:
			return nil, fmt.Errorf("%s.%s: block type %T is not upgraded", at, name, b)
		}
	}
	return out, nil
}
