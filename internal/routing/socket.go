package routing

import (
	"fmt"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// SocketName is the name of the varnishd listen socket (-a NAME=:PORT) that
// serves every Gateway listener on port. varnishd cannot bind one port twice,
// so all listeners sharing a port share one socket: SocketName(8080) is
// "port-8080". The chaperone, the provider and ghost.json all use this name.
func SocketName(port gatewayv1.PortNumber) string {
	return fmt.Sprintf("port-%d", port)
}
