// Package tlssource finds the certificates of a Gateway's HTTPS listeners
// for tlsterm: the Secrets their tls.certificateRefs name, from the
// Kubernetes API (Kube: one informer per Secret, by name) or from the
// standalone routing directory (Dir: kubernetes.io/tls Secret manifests
// next to gateway.yaml). Resolve turns a Gateway and the Secrets and
// ReferenceGrants a source sees into tlsterm.Listeners; Run feeds them to a
// tlsterm.Manager.
package tlssource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/tlsterm"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// Snapshot is what a source sees now.
type Snapshot struct {
	// Generation is the Gateway's (observedGeneration of the listeners'
	// conditions).
	Generation int64
	Listeners  []tlsterm.Listener
	// ListenerSetGenerations are the generations of the ListenerSets
	// whose listeners are among Listeners, as the provider recorded them
	// (routing.ListenerSetGenerationsAnnotation): the observedGeneration
	// of those listeners' conditions. A ListenerSet missing here (a
	// provider that did not record it) gets no status from the pods.
	ListenerSetGenerations map[object.Ref]int64
}

// Source watches the certificates of one Gateway's HTTPS listeners.
type Source interface {
	// Run watches until ctx ends and calls changed (which never blocks)
	// after anything that may change the Snapshot.
	Run(ctx context.Context, changed func()) error
	// Snapshot returns the current view; ok is false while the source
	// has not seen a complete state yet (the Gateway or a Secret's
	// watch not synced).
	Snapshot() (s Snapshot, ok bool)
}

// Refs returns the Secrets the Gateway's HTTPS listeners reference (only
// core Secrets; namespace defaulted to the Gateway's), in order, without
// duplicates.
func Refs(gw *gatewayv1.Gateway) []tlsterm.SecretRef {
	var out []tlsterm.SecretRef
	for _, l := range gw.Spec.Listeners {
		if l.Protocol != gatewayv1.HTTPSProtocolType || l.TLS == nil {
			continue
		}
		for _, r := range l.TLS.CertificateRefs {
			if !isSecret(r) {
				continue
			}
			ref := secretRef(gw, r)
			if !slices.Contains(out, ref) {
				out = append(out, ref)
			}
		}
	}
	return out
}

// GrantNamespaces are the namespaces whose ReferenceGrants decide whether
// the Gateway's HTTPS listeners may use their Secrets: those of Secrets
// outside the namespace of the listener's owner (the Gateway's, or for
// the listener of a ListenerSet, the ListenerSet's), in order, without
// duplicates.
func GrantNamespaces(gw *gatewayv1.Gateway) []string {
	var out []string
	for _, l := range gw.Spec.Listeners {
		if l.Protocol != gatewayv1.HTTPSProtocolType || l.TLS == nil {
			continue
		}
		from := gw.Namespace
		if set, ok := routing.ListenerSetOf(string(l.Name)); ok {
			from = set.Namespace
		}
		for _, r := range l.TLS.CertificateRefs {
			if ns := secretRef(gw, r).Namespace; isSecret(r) && ns != from && !slices.Contains(out, ns) {
				out = append(out, ns)
			}
		}
	}
	return out
}

func isSecret(r gatewayv1.SecretObjectReference) bool {
	return (r.Group == nil || *r.Group == "" || *r.Group == "core") && (r.Kind == nil || *r.Kind == "Secret")
}

func secretRef(gw *gatewayv1.Gateway, r gatewayv1.SecretObjectReference) tlsterm.SecretRef {
	ns := gw.Namespace
	if r.Namespace != nil && *r.Namespace != "" {
		ns = string(*r.Namespace)
	}
	return tlsterm.SecretRef{Namespace: ns, Name: string(r.Name)}
}

// Lookup finds a Secret; nil when it does not exist.
type Lookup func(ref tlsterm.SecretRef) *corev1.Secret

// errNotFound is the error of a reference whose Secret the source does not
// have.
var errNotFound = errors.New("not found")

// ProblemOf classifies an error of the Kubernetes API (a list or watch of a
// Secret or of ReferenceGrants) for tlsterm: NotFound, Forbidden and
// Unauthorized say the chaperone may not have the object (any more), so
// the certificate is withdrawn (ProblemRevoked); anything else, an API
// server that cannot be reached, a 5xx or 429 answer, a timeout, is
// transient (ProblemTransient): the last good certificate stays.
func ProblemOf(err error) tlsterm.Problem {
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return tlsterm.ProblemRevoked
	}
	return tlsterm.ProblemTransient
}

// benign reports whether a list or watch error is the normal end of a
// watch (closed by the API server, or expired and listed again).
func benign(err error) bool {
	return errors.Is(err, io.EOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// Resolve returns the Gateway's HTTPS listeners with the certificates
// their refs resolve to. A ref that does not resolve carries the reason:
// RefNotPermitted for another namespace without a ReferenceGrant there
// from this Gateway's namespace to the Secret (for the listener of a
// ListenerSet among gw's listeners: from kind ListenerSet of the
// ListenerSet's namespace, routing.ListenerCertificateRefPermitted), InvalidCertificateRef for a
// kind other than core Secret, a missing Secret or one whose type is not
// kubernetes.io/tls. grants are the ReferenceGrants of the Secrets'
// namespaces. A ref to no Secret, without a ReferenceGrant or to a
// missing Secret is tlsterm.ProblemRevoked (the listener may not use the
// Secret: its certificate is withdrawn), one to a Secret of another type
// tlsterm.ProblemContent (the last good certificate stays).
func Resolve(gw *gatewayv1.Gateway, lookup Lookup, grants []*gatewayv1.ReferenceGrant) []tlsterm.Listener {
	var out []tlsterm.Listener
	for _, l := range gw.Spec.Listeners {
		if l.Protocol != gatewayv1.HTTPSProtocolType {
			continue
		}
		tl := tlsterm.Listener{Name: string(l.Name), Port: int(l.Port)}
		if l.TLS != nil {
			for _, r := range l.TLS.CertificateRefs {
				tl.Certificates = append(tl.Certificates, resolveRef(gw, string(l.Name), r, lookup, grants))
			}
		}
		out = append(out, tl)
	}
	return out
}

func resolveRef(gw *gatewayv1.Gateway, listener string, r gatewayv1.SecretObjectReference, lookup Lookup, grants []*gatewayv1.ReferenceGrant) tlsterm.Certificate {
	ref := secretRef(gw, r)
	c := tlsterm.Certificate{Ref: ref, Reason: gatewayv1.ListenerReasonInvalidCertificateRef}
	if !isSecret(r) {
		group, kind := "", "Secret"
		if r.Group != nil {
			group = string(*r.Group)
		}
		if r.Kind != nil {
			kind = string(*r.Kind)
		}
		c.Err = fmt.Errorf("certificateRef group %q kind %q: only core Secrets (group \"\", kind Secret) of type kubernetes.io/tls are supported", group, kind)
		c.Problem = tlsterm.ProblemRevoked
		return c
	}
	if !routing.ListenerCertificateRefPermitted(grants, gw, listener, ref.Namespace, ref.Name) {
		kind, fromNS := "Gateway", gw.Namespace
		if set, ok := routing.ListenerSetOf(listener); ok {
			kind, fromNS = "ListenerSet", set.Namespace
		}
		c.Reason = gatewayv1.ListenerReasonRefNotPermitted
		c.Err = fmt.Errorf("no ReferenceGrant in namespace %s lets %ss of namespace %s reference the Secret %s: create one (from group %s kind %s namespace %s, to group \"\" kind Secret)",
			ref.Namespace, kind, fromNS, ref.Name, gatewayv1.GroupName, kind, fromNS)
		c.Problem = tlsterm.ProblemRevoked
		return c
	}
	s := lookup(ref)
	switch {
	case s == nil:
		c.Err = fmt.Errorf("%w: create a Secret of type kubernetes.io/tls named %s in namespace %s", errNotFound, ref.Name, ref.Namespace)
		c.Problem = tlsterm.ProblemRevoked
	case s.Type != corev1.SecretTypeTLS:
		c.Err = fmt.Errorf("type %q: want kubernetes.io/tls (keys tls.crt and tls.key)", s.Type)
		c.Problem = tlsterm.ProblemContent
	default:
		c.Cert, c.Key = s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
		c.Reason = ""
	}
	return c
}

// Run feeds the source's snapshots to the manager until ctx ends; before
// each is applied, onSnapshot gets it: the generations (the Gateway's,
// its ListenerSets') the manager's listener statuses describe from then
// on (may be nil).
func Run(ctx context.Context, src Source, mgr *tlsterm.Manager, onSnapshot func(Snapshot)) error {
	kick := make(chan struct{}, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- src.Run(ctx, func() {
			select {
			case kick <- struct{}{}:
			default:
			}
		})
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return err
		case <-kick:
		}
		s, ok := src.Snapshot()
		if !ok {
			continue
		}
		if onSnapshot != nil {
			onSnapshot(s)
		}
		mgr.Update(s.Listeners)
	}
}
