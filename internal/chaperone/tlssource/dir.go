package tlssource

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/chaperone/routingsync"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/chaperone/tlsterm"
)

// Dir reads the certificates from the standalone routing directory
// (--routing=dir): the Gateway from gateway.yaml and kubernetes.io/tls
// Secret manifests from the other *.yaml, *.yml and *.json files, as
// routingsync.DirSource reads them (a Secret without namespace is in the
// Gateway's). ReferenceGrants of the directory permit references to
// another namespace.
type Dir struct {
	src *routingsync.DirSource
	log *slog.Logger
}

// NewDir returns a Dir for the routing directory dir.
func NewDir(dir string, log *slog.Logger) *Dir {
	if log == nil {
		log = slog.Default()
	}
	return &Dir{src: routingsync.NewDirSource(dir, log), log: log.With("component", "tls", "dir", dir)}
}

// Run implements Source.
func (d *Dir) Run(ctx context.Context, changed func()) error { return d.src.Run(ctx, changed) }

// Snapshot implements Source. While the directory has an error (logged by
// the routing half), the Gateway and Secrets it could read are used; with
// no Gateway there is no snapshot.
func (d *Dir) Snapshot() (Snapshot, bool) {
	st, _ := d.src.State()
	if st == nil || st.Gateway == nil {
		return Snapshot{}, false
	}
	gw := st.Gateway
	lookup := func(ref tlsterm.SecretRef) *corev1.Secret {
		for _, s := range st.Secrets {
			ns := s.Namespace
			if ns == "" {
				ns = gw.Namespace
			}
			if ns == ref.Namespace && s.Name == ref.Name {
				return s
			}
		}
		return nil
	}
	var grants = st.Objects
	if grants == nil {
		return Snapshot{Generation: gw.Generation, Listeners: Resolve(gw, lookup, nil)}, true
	}
	return Snapshot{Generation: gw.Generation, Listeners: Resolve(gw, lookup, grants.ReferenceGrants)}, true
}
