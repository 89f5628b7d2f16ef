package tlssource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/routingsync"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/tlsterm"
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
// the routing half), the Gateway and Secrets it could read are used, and
// a Secret or ReferenceGrant missing from them is a transient problem (the
// file that holds it may be the one that does not parse): the last good
// certificate stays until the directory reads again. With no Gateway
// there is no snapshot.
func (d *Dir) Snapshot() (Snapshot, bool) {
	st, dirErr := d.src.State()
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
	var grants []*gatewayv1.ReferenceGrant
	if st.Objects != nil {
		grants = st.Objects.ReferenceGrants
	}
	ls := Resolve(gw, lookup, grants)
	if dirErr != nil {
		for i := range ls {
			for j := range ls[i].Certificates {
				c := &ls[i].Certificates[j]
				if c.Problem == tlsterm.ProblemRevoked && (errors.Is(c.Err, errNotFound) || c.Reason == gatewayv1.ListenerReasonRefNotPermitted) {
					c.Problem = tlsterm.ProblemTransient
					c.Err = fmt.Errorf("%w (the routing directory has an error, which may hide it: %v)", c.Err, dirErr)
				}
			}
		}
	}
	return Snapshot{Generation: gw.Generation, Listeners: ls}, true
}
