package provider

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rbacv1apply "k8s.io/client-go/applyconfigurations/rbac/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// The invalidation endpoint of the gateway pods (invalidation_endpoint_port):
// the chaperone's --invalidate-addr, its container port, the endpoint's
// rules in the pods' Role and a ClusterRoleBinding of the pods'
// ServiceAccount to system:auth-delegator, with which the chaperone checks
// callers (TokenReview, SubjectAccessReview). There is no Service for the
// port: the gateway's own Service may be a public load balancer, and the
// endpoint is for callers inside the cluster, which reach any pod (each
// fans the invalidation out to all of them).

// minInvalidationPort is the lowest port the endpoint may use: the
// chaperone runs as a non-root user, and the pod lets it bind ports from
// the lowest listener port up only (gwruntime.UnprivilegedPortSysctl).
const minInvalidationPort = 1024

func invalidationPortAttribute() schema.Int64Attribute {
	return schema.Int64Attribute{
		Optional: true,
		Description: "The port of the gateway pods' invalidation endpoint, POST /invalidate, for callers inside the " +
			"cluster with a Kubernetes token for the audience varnishgw-invalidate whose identity may create " +
			"cacheinvalidations in the gateway's namespace; null (the default) serves none. Setting it adds the " +
			"container port and the rights the endpoint needs (among them a ClusterRoleBinding to " +
			"system:auth-delegator, deleted with the attribute; see the caching guide), and no Service exposes " +
			"the port. It must be from 1024 to 65535 and differ from every listener port and from the pod's own " +
			"ports (9091, 6082 and 6084); changing it rolls the pods.",
		Validators: []validator.Int64{int64validator.Between(minInvalidationPort, 65535)},
	}
}

// podOwnPorts are the ports the gateway pods use themselves, which the
// invalidation endpoint cannot take: the chaperone's health server and
// varnishd's admin and ghost admin connections (on loopback, which a port
// bound on every address clashes with).
func podOwnPorts() map[int64]string {
	out := map[int64]string{gwruntime.HealthPort: "the chaperone's health server (probes and metrics)"}
	for addr, what := range map[string]string{gwruntime.AdminAddr: "varnishd's admin connection", gwruntime.GhostAdminAddr: "ghost's admin connection"} {
		if _, p, err := net.SplitHostPort(addr); err == nil {
			if n, err := strconv.ParseInt(p, 10, 64); err == nil {
				out[n] = what
			}
		}
	}
	return out
}

// validateInvalidationPort rejects an invalidation_endpoint_port that a
// listener or the pod itself uses.
func (m *gatewayModel) validateInvalidationPort(diags *diag.Diagnostics) {
	p := m.InvalidationPort
	if p.IsNull() || p.IsUnknown() {
		return
	}
	at := path.Root("invalidation_endpoint_port")
	port := p.ValueInt64()
	for _, l := range m.Listeners {
		if !l.Port.IsUnknown() && l.Port.ValueInt64() == port {
			diags.AddAttributeError(at, "Invalidation endpoint port in use",
				fmt.Sprintf("invalidation_endpoint_port = %d is the port of listener %q; the endpoint needs a port of its own, "+
					"which the gateway's Service never exposes. Choose another port, for example 9092.", port, l.Name.ValueString()))
			return
		}
	}
	if what, ok := podOwnPorts()[port]; ok {
		diags.AddAttributeError(at, "Invalidation endpoint port in use",
			fmt.Sprintf("invalidation_endpoint_port = %d is the port of %s in the gateway pod. Choose another port, for example 9092.", port, what))
	}
}

// invalidationPortOf reads invalidation_endpoint_port back from the
// chaperone's --invalidate-addr (":PORT"); null when it has none.
func invalidationPortOf(addr string) types.Int64 {
	if addr == "" {
		return types.Int64Null()
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return types.Int64Null()
	}
	n, err := strconv.ParseInt(p, 10, 64)
	if err != nil {
		return types.Int64Null()
	}
	return types.Int64Value(n)
}

// applyInvalidateAuthBinding writes, when the pods serve the invalidation
// endpoint, the ClusterRoleBinding gwruntime.InvalidateAuthBindingName of
// their ServiceAccount to system:auth-delegator; otherwise it deletes the
// gateway's one, if any. A cluster-scoped object cannot be owned by the
// Gateway: it carries the gateway's runtime labels, by which deleteRuntime
// knows it.
func (c *clients) applyInvalidateAuthBinding(ctx context.Context, s *gwruntime.Spec) error {
	if s.InvalidatePort == 0 {
		return c.deleteInvalidateAuthBinding(ctx, s.Gateway)
	}
	name := gwruntime.InvalidateAuthBindingName(s.Gateway)
	crb := rbacv1apply.ClusterRoleBinding(name).WithLabels(s.ObjectLabels()).WithAnnotations(s.ObjectAnnotations()).
		WithRoleRef(rbacv1apply.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(gwruntime.AuthDelegatorClusterRole)).
		WithSubjects(rbacv1apply.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(s.Name()).WithNamespace(s.Gateway.Namespace))
	if _, err := c.Kube.RbacV1().ClusterRoleBindings().Apply(ctx, crb, applyOptions()); err != nil {
		hint := ""
		if apierrors.IsForbidden(err) {
			hint = fmt.Sprintf("; the provider needs the rights of the ClusterRole %s of docs/guides/security.md: clusterrolebindings "+
				"get, create, patch and delete, and bind of the ClusterRole %s", ProviderClusterRoleName, gwruntime.AuthDelegatorClusterRole)
		}
		return fmt.Errorf("apply ClusterRoleBinding %s, which lets the gateway pods check the callers of their invalidation endpoint: %w%s", name, err, hint)
	}
	return nil
}

// deleteInvalidateAuthBinding deletes the gateway's ClusterRoleBinding to
// system:auth-delegator if there is one and it is the gateway's (carries
// its runtime labels). An identity that may not read ClusterRoleBindings
// (the provider's role of releases before the endpoint) cannot have
// written one: that is no error, so gateways without the endpoint need no
// new rights.
func (c *clients) deleteInvalidateAuthBinding(ctx context.Context, gw routing.ObjectRef) error {
	name := gwruntime.InvalidateAuthBindingName(gw)
	crb, err := c.Kube.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get ClusterRoleBinding %s: %w", name, err)
	}
	if !hasMetadata(crb, gwruntime.RuntimeLabels(gw), nil) {
		return nil // not ours
	}
	err = c.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &crb.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete ClusterRoleBinding %s: %w", name, err)
	}
	return nil
}

// invalidateAuthBindingDrift says what differs between the gateway's
// ClusterRoleBinding to system:auth-delegator and what s asks for: missing,
// bound to another role or subject, relabelled, or present although the
// endpoint is off. Empty when it is as it should be.
func (c *clients) invalidateAuthBindingDrift(ctx context.Context, s *gwruntime.Spec) (string, error) {
	name := gwruntime.InvalidateAuthBindingName(s.Gateway)
	what := "ClusterRoleBinding " + name
	crb, err := c.Kube.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
	switch {
	case (apierrors.IsNotFound(err) || apierrors.IsForbidden(err)) && s.InvalidatePort == 0:
		// Forbidden: see deleteInvalidateAuthBinding.
		return "", nil
	case apierrors.IsNotFound(err):
		return what + " is missing", nil
	case err != nil:
		return "", fmt.Errorf("get %s: %w", what, err)
	case s.InvalidatePort == 0:
		if hasMetadata(crb, gwruntime.RuntimeLabels(s.Gateway), nil) {
			return what + " is left although invalidation_endpoint_port is unset", nil
		}
		return "", nil
	}
	if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != gwruntime.AuthDelegatorClusterRole || len(crb.Subjects) != 1 ||
		crb.Subjects[0].Kind != rbacv1.ServiceAccountKind || crb.Subjects[0].Name != s.Name() || crb.Subjects[0].Namespace != s.Gateway.Namespace {
		return what + " changed", nil
	}
	if !hasMetadata(crb, s.ObjectLabels(), s.ObjectAnnotations()) {
		return "the labels or annotations of " + what + " changed", nil
	}
	return "", nil
}
