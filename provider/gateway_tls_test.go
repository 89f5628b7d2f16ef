package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestListenerTLSRoundTrip: a tls block written (listenerTLS) and read
// back from the Gateway as the API server stores it, defaults filled in
// (readListenerTLS), is the block configured, whether the defaults were
// spelt out or left unset; on import they stay unset.
func TestListenerTLSRoundTrip(t *testing.T) {
	null := types.StringNull()
	str := types.StringValue
	ref := func(group, kind types.String, name string, ns types.String) certificateRefModel {
		return certificateRefModel{Group: group, Kind: kind, Name: str(name), Namespace: ns}
	}
	// stored is what the API server keeps: mode, group and kind defaulted.
	stored := func(tls *gatewayv1.ListenerTLSConfig) *gatewayv1.ListenerTLSConfig {
		if tls.Mode == nil {
			m := gatewayv1.TLSModeTerminate
			tls.Mode = &m
		}
		for i := range tls.CertificateRefs {
			r := &tls.CertificateRefs[i]
			if r.Group == nil {
				g := gatewayv1.Group("")
				r.Group = &g
			}
			if r.Kind == nil {
				k := gatewayv1.Kind("Secret")
				r.Kind = &k
			}
		}
		return tls
	}
	for _, tc := range []struct {
		name string
		tls  *listenerTLSModel
	}{
		{"defaults unset", &listenerTLSModel{Mode: null, Options: types.MapNull(types.StringType),
			CertificateRefs: []certificateRefModel{ref(null, null, "www", null), ref(null, null, "shared", str("certs"))}}},
		{"defaults spelt out", &listenerTLSModel{Mode: str("Terminate"), Options: types.MapNull(types.StringType),
			CertificateRefs: []certificateRefModel{ref(str(""), str("Secret"), "www", null)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := stored(tc.tls.listenerTLS())
			got := readListenerTLS(tc.tls, live)
			if !got.Mode.Equal(tc.tls.Mode) || len(got.CertificateRefs) != len(tc.tls.CertificateRefs) {
				t.Fatalf("read back %+v, want %+v", got, tc.tls)
			}
			for i, r := range got.CertificateRefs {
				if w := tc.tls.CertificateRefs[i]; !r.Group.Equal(w.Group) || !r.Kind.Equal(w.Kind) || !r.Name.Equal(w.Name) || !r.Namespace.Equal(w.Namespace) {
					t.Errorf("certificate_ref[%d] = %+v, want %+v", i, r, w)
				}
			}
			imported := readListenerTLS(nil, live)
			if !imported.Mode.IsNull() || !imported.CertificateRefs[0].Group.IsNull() || !imported.CertificateRefs[0].Kind.IsNull() {
				t.Errorf("imported %+v: the defaults should stay unset", imported)
			}
		})
	}
	if readListenerTLS(nil, nil) != nil || (*listenerTLSModel)(nil).listenerTLS() != nil {
		t.Error("no tls block must stay none")
	}
}
