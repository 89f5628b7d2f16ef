package routing

import (
	"slices"
	"testing"
)

func TestIntersectHostnames(t *testing.T) {
	tests := []struct {
		listener string
		route    []string
		want     []string
	}{
		{"", nil, []string{"*"}},
		{"foo.example.com", nil, []string{"foo.example.com"}},
		{"", []string{"b.example.com", "a.example.com"}, []string{"a.example.com", "b.example.com"}},
		{"foo.example.com", []string{"foo.example.com"}, []string{"foo.example.com"}},
		{"foo.example.com", []string{"bar.example.com"}, nil},
		{"*.example.com", []string{"foo.example.com", "example.com", "a.b.example.com"}, []string{"a.b.example.com", "foo.example.com"}},
		{"foo.example.com", []string{"*.example.com"}, []string{"foo.example.com"}},
		{"*.example.com", []string{"*.example.com"}, []string{"*.example.com"}},
		{"*.example.com", []string{"*.foo.example.com"}, []string{"*.foo.example.com"}},
		{"*.foo.example.com", []string{"*.example.com"}, []string{"*.foo.example.com"}},
		{"*.example.com", []string{"*.example.org"}, nil},
		{"example.com", []string{"*.example.com"}, nil},
	}
	for _, tt := range tests {
		if got := intersectHostnames(tt.listener, tt.route); !slices.Equal(got, tt.want) {
			t.Errorf("intersectHostnames(%q, %q) = %q, want %q", tt.listener, tt.route, got, tt.want)
		}
	}
}

func TestCoveringPatterns(t *testing.T) {
	tests := map[string][]string{
		"a.b.c": {"a.b.c", "*.b.c", "*.c", "*"},
		"*.b.c": {"*.b.c", "*.c", "*"},
		"*":     {"*"},
		"local": {"local", "*"},
	}
	for in, want := range tests {
		if got := coveringPatterns(in); !slices.Equal(got, want) {
			t.Errorf("coveringPatterns(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSocketName(t *testing.T) {
	if got := SocketName(8080); got != "port-8080" {
		t.Errorf("SocketName(8080) = %q", got)
	}
}
