package routing

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// How the provider stores fragments and the chaperone finds them: one
// ConfigMap per (route, Gateway) in the Gateway's namespace, named by
// FragmentConfigMapName, labelled with FragmentLabels, the fragment JSON
// under FragmentDataKey.
const (
	// FragmentGatewayLabel carries the Gateway name (hashed when longer
	// than a label value may be); the chaperone selects on it.
	FragmentGatewayLabel = "varnishgw.dev/gateway"
	// FragmentDataKey is the ConfigMap data key of MarshalFragment's output.
	FragmentDataKey = "fragment.json"
)

// FragmentConfigMapName is the name of the ConfigMap that holds route's
// fragment for gw: "vgw-" plus a readable gateway-namespace-name part, cut
// to fit, plus a hash of the exact triple, so that names never collide and
// always are valid DNS subdomains.
func FragmentConfigMapName(gw ObjectRef, route ObjectRef) string {
	sum := sha256.Sum256([]byte(gw.Name + "\x00" + route.Namespace + "\x00" + route.Name))
	readable := strings.ToLower(gw.Name + "-" + route.Namespace + "-" + route.Name)
	readable = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, readable)
	if len(readable) > 200 {
		readable = readable[:200]
	}
	return "vgw-" + strings.Trim(readable, "-") + "-" + hex.EncodeToString(sum[:5])
}

// FragmentLabels are the labels of a fragment ConfigMap for gw.
func FragmentLabels(gw ObjectRef) map[string]string {
	return map[string]string{FragmentGatewayLabel: fragmentLabelValue(gw.Name)}
}

func fragmentLabelValue(name string) string {
	if len(validation.IsValidLabelValue(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "sha256-" + hex.EncodeToString(sum[:16])
}

// ListenerAttachedRoutes counts, per listener name, the accepted routes
// attached to it: the Gateway's status.listeners[].attachedRoutes.
func ListenerAttachedRoutes(fragments []*Fragment) map[string]int32 {
	out := map[string]int32{}
	for _, f := range fragments {
		if f == nil {
			continue
		}
		for _, l := range f.Listeners {
			out[l.Name]++
		}
	}
	return out
}
