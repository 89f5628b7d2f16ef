package vcl

import "testing"

func TestOlderName(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"main-20261122T190000-1", "main-20261122T190000-2", true},
		{"main-20261122T190000-10", "main-20261122T190000-9", false},
		{"main-20261122T185959-10", "main-20261122T190000-1", true},
		{"main-20261122T190000-3", "main-20261122T190000-3", false},
	} {
		if got := olderName(tc.a, tc.b); got != tc.want {
			t.Errorf("olderName(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
