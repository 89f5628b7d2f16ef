package provider

import (
	"slices"
	"sync"
)

// classChanges carries, from a class's plan to the plans of its gateways,
// which of the class's attributes will change.
//
// A gateway's pods are started with its class's image and parameters, and
// its main.vcl holds the class's VCL, so a class change must update the
// gateway in the same apply. The gateway's configuration names the class
// only by its name, which does not change, and the class is written only
// at apply, so the gateway's plan cannot see the change in the cluster.
// Terraform plans a class before the gateways that refer to it, and one
// provider process serves a whole plan, so the class's ModifyPlan records
// the change here and the gateways' ModifyPlan reads it. When the class is
// not planned in the same run (-target, or another provider
// configuration), the gateway's plan still finds the change in the cluster
// once the class is applied, one plan later.
type classChanges struct {
	mu      sync.Mutex
	changed map[string][]string // class name → changed attributes
}

// note records that the class name will change attrs.
func (c *classChanges) note(name string, attrs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changed == nil {
		c.changed = map[string][]string{}
	}
	c.changed[name] = slices.Clone(attrs)
}

// of returns the attributes class name will change in this run, if any.
func (c *classChanges) of(name string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed[name]
}
