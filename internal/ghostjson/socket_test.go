package ghostjson

import "testing"

func TestSocketName(t *testing.T) {
	type port int32
	for in, want := range map[port]string{80: "port-80", 8080: "port-8080", 65535: "port-65535"} {
		if got := SocketName(in); got != want {
			t.Errorf("SocketName(%d) = %q, want %q", in, got, want)
		}
	}
}
