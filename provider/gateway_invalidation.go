package provider

import (
	"fmt"
	"net"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
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
