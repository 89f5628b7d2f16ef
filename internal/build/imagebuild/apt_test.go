package imagebuild

import (
	"reflect"
	"testing"
)

func TestParseSimulation(t *testing.T) {
	out := []byte(`NOTE: This is only a simulation!
Reading package lists...
Inst libc6 (2.41-12+deb13u5 Debian-Security:13/stable-security [amd64])
Inst varnish (7.7.0-3+deb13u2 Debian:13.2/stable [amd64]) []
Conf libc6 (2.41-12+deb13u5 Debian-Security:13/stable-security [amd64])
`)
	got, err := parseSimulation(out)
	want := []string{"libc6=2.41-12+deb13u5", "varnish=7.7.0-3+deb13u2"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
	if _, err := parseSimulation([]byte("Inst libc6 [2.40] (2.41 Debian:13)\n")); err == nil {
		t.Error("an upgrade line was accepted")
	}
	if _, err := parseSimulation([]byte("0 upgraded\n")); err == nil {
		t.Error("an empty resolution was accepted")
	}
}
