// Package object names Kubernetes objects: the one reference type that
// routing, the runtime contract (gwruntime), varnishgw's API group
// (vgwapi), the provider and the chaperone share. It imports nothing of
// this module, so any package can use it.
package object

// Ref names a namespaced object.
type Ref struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// String is namespace/name.
func (r Ref) String() string { return r.Namespace + "/" + r.Name }
