package gwruntime

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
)

// GatewayLabel carries the Gateway's name (hashed when longer than a label
// value may be) on its runtime objects, RoutingFragments and
// GatewayPodReports; the pods and the provider select on it.
const GatewayLabel = "varnishgw.dev/gateway"

// ControllerName is the GatewayClass controllerName of varnishgw classes,
// which the provider and the chaperone put in the routes' status.parents
// entries they write.
const ControllerName = "varnishgw.dev/gateway-controller"

// RoutesFieldManager is the field manager under which the gateway pods
// write what they keep true about their routes between applies: the
// listeners' attachedRoutes and the routes' ResolvedRefs condition. The
// provider writes a listener's attachedRoutes only while no pod does.
const RoutesFieldManager = status.ChaperoneRoutesManager

// FragmentName names the RoutingFragment a route writes for gw, in gw's
// namespace: "vgw-" plus a readable gateway-namespace-name part, cut to
// fit, plus a hash of the exact triple, so that names never collide within
// the namespace and always are valid DNS subdomains.
func FragmentName(gw, route object.Ref) string {
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

// GatewayLabels select the objects of gw that carry GatewayLabel.
func GatewayLabels(gw object.Ref) map[string]string {
	return map[string]string{GatewayLabel: gatewayLabelValue(gw.Name)}
}

func gatewayLabelValue(name string) string {
	if len(validation.IsValidLabelValue(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "sha256-" + hex.EncodeToString(sum[:16])
}
