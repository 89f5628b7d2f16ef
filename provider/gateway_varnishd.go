package provider

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

// varnishdArgs is the command line of varnishd in the varnish container
// of sidecar mode: the sockets, admin connection, secret and boot VCL the
// chaperone expects (design/chaperone.md, "sidecar").
func varnishdArgs(s *gwruntime.Spec) []string {
	cfg := varnishd.Config{WorkDir: gwruntime.WorkDir, GhostAdminAddr: gwruntime.GhostAdminAddr, Storage: []string{s.Class.Storage}}
	for _, p := range s.Ports {
		if slices.Contains(s.TLSPorts, p) {
			// hitch (in the chaperone container) hands the connections
			// of an HTTPS port to this Unix socket, with a PROXY header.
			cfg.Listeners = append(cfg.Listeners, varnishd.TLSListener(gwruntime.DefaultChaperoneFlags().TLSDir, int(p)))
			continue
		}
		// With proxy_protocol the load balancer's PROXY header comes first
		// on every connection (the chaperone does the same in supervise
		// mode).
		cfg.Listeners = append(cfg.Listeners, varnishd.Listener{Name: ghostjson.SocketName(p), Addr: fmt.Sprintf(":%d", p), Proxy: s.ProxyProtocol})
	}
	for _, k := range slices.Sorted(maps.Keys(s.Class.Params)) {
		cfg.Params = append(cfg.Params, k+"="+s.Class.Params[k])
	}
	// The gateway's varnishd defaults, as the chaperone passes them in
	// supervise mode; a class parameter of the same name replaces one.
	cfg.Params = varnishd.WithDefaults(cfg.Params)
	if len(s.TLSPorts) > 0 && !s.NoHTTP2 {
		cfg.Params = append(cfg.Params, "feature=+http2")
	}
	return varnishd.Args(cfg, gwruntime.AdminAddr, gwruntime.SecretFile, gwruntime.BootVCLFile)
}

// parseResources turns a map of resource names to quantities into a
// ResourceList, naming the attribute in errors.
func parseResources(attr string, m map[string]string) (corev1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := corev1.ResourceList{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		q, err := resource.ParseQuantity(m[k])
		if err != nil {
			return nil, fmt.Errorf("%s[%q] = %q is not a Kubernetes quantity (%v); use for example \"500m\" for CPU or \"256Mi\" for memory", attr, k, m[k], err)
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}
