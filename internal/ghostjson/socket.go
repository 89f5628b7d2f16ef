package ghostjson

import "strconv"

// SocketName is the name of the varnishd listen socket (-a NAME=:PORT) that
// serves every Gateway listener on port: varnishd cannot bind one port
// twice, so all listeners sharing a port share one socket, and
// SocketName(8080) is "port-8080". Socket.Name, the chaperone's -a
// arguments and the pods' container and Service port names all use it.
func SocketName[P ~int | ~int32](port P) string {
	return "port-" + strconv.Itoa(int(port))
}
