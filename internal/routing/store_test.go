package routing

import (
	"testing"
)

func TestListenerAttachedRoutes(t *testing.T) {
	gw := gateway(listener("a", 80, ""), listener("b", 8080, "x.org"))
	frags := attachAll(t, gw, nil, route("infra", "r1"), route("infra", "r2", section("b")), route("other", "denied"))
	got := ListenerAttachedRoutes(frags)
	if got["a"] != 1 || got["b"] != 2 || len(got) != 2 {
		t.Errorf("attached = %v", got)
	}
}
