// Command gatewayfiles writes the gateway configurations make bench-cache
// (internal/bench/cache/bench.sh) runs, as the gateway renders them: main.vcl
// from internal/mainvcl and a ghost.json of vhosts × routes from
// internal/ghostjson, every route sending to one origin. It also prints the
// gateway's default varnishd parameters (varnishd.DefaultParams), so the
// benchmark measures the defaults the chaperone passes.
//
// With -dir it writes three configurations, each a directory with main.vcl
// and ghost.json:
//
//	pass     no user VCL: main.vcl's default passes every request
//	uservcl  Gateway VCL "sub vcl_recv { return (hash); }": caching as
//	         users cache by hand, routes without a cache policy
//	policy   no user VCL, every route naming one cache policy in ghost.json
//	         (cachePolicies): written only when main.vcl's defaults consult
//	         the policy (router.cacheable()); ghost may still reject the
//	         file, which the script finds out by loading it
//
// Usage:
//
//	gatewayfiles -dir DIR -origin 127.0.0.1:PORT -vmod PATH [-vhosts 1000 -routes 10]
//	gatewayfiles -params
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/mainvcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

// Socket is the name of the listen socket the vhosts are on, as the
// gateway names an HTTP listener's (ghostjson.SocketName).
const Socket = "port-80"

// UserCacheVCL is the Gateway VCL of the uservcl configuration.
const UserCacheVCL = "sub vcl_recv {\n\treturn (hash);\n}\n"

func main() {
	dir := flag.String("dir", "", "directory to write pass/, uservcl/ and policy/ into")
	origin := flag.String("origin", "", "the origin every route sends to, IP:PORT")
	vmod := flag.String("vmod", "", "libvmod_ghost.so for main.vcl's import")
	vhosts := flag.Int("vhosts", 1000, "vhosts v0.example.com ... in ghost.json")
	routes := flag.Int("routes", 10, "routes per vhost")
	params := flag.Bool("params", false, "print the gateway's default varnishd -p arguments, one per line, and exit")
	flag.Parse()
	if *params {
		for _, p := range varnishd.DefaultParams() {
			fmt.Println(p)
		}
		return
	}
	if err := write(*dir, *origin, *vmod, *vhosts, *routes); err != nil {
		fmt.Fprintln(os.Stderr, "gatewayfiles:", err)
		os.Exit(1)
	}
}

// write writes the configurations into dir and prints the names of those
// written.
func write(dir, origin, vmod string, vhosts, routes int) error {
	if dir == "" || vmod == "" {
		return fmt.Errorf("-dir and -vmod are required, e.g. -dir /tmp/bench -vmod ghost/libvmod_ghost.so")
	}
	host, portText, err := net.SplitHostPort(origin)
	if err != nil {
		return fmt.Errorf("-origin=%q: %w; want IP:PORT, e.g. -origin 127.0.0.1:8080", origin, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return fmt.Errorf("-origin=%q: port %q is not 1-65535", origin, portText)
	}
	ep := ghostjson.Endpoint{Address: host, Port: int32(port)}
	confs := []struct {
		name   string
		vcl    string
		policy bool
	}{
		{"pass", "", false},
		{"uservcl", UserCacheVCL, false},
		{"policy", "", true},
	}
	var written []string
	for _, c := range confs {
		sub := filepath.Join(dir, c.name)
		vcl := mainvcl.Render(mainvcl.Options{GatewayVCL: c.vcl, GhostJSON: filepath.Join(sub, "ghost.json"), VMOD: vmod})
		if c.policy && !PolicyVCL(vcl) {
			continue
		}
		doc := Document(vhosts, routes, ep, c.policy)
		data, err := ghostjson.Marshal(doc)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(sub, "ghost.json"), data, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(sub, "main.vcl"), []byte(vcl), 0o644); err != nil {
			return err
		}
		written = append(written, c.name)
	}
	fmt.Println(strings.Join(written, " "))
	return nil
}

// PolicyVCL reports whether main.vcl's defaults decide caching by the
// route's policy (router.cacheable(), issue #15's contract) rather than
// passing every request user VCL did not decide.
func PolicyVCL(vcl string) bool { return strings.Contains(vcl, "router.cacheable()") }

// Policy is the cache policy of the policy configuration: the contract's
// gateway defaults (ttl 2m, grace 10s).
var Policy = ghostjson.CachePolicy{Name: "gateway", TTLMs: 120_000, GraceMs: 10_000}

// Document is a ghost.json of vhosts × routes on the Socket listener, all
// to the one backend "bench/origin:80" at ep: vhost i is
// v<i>.example.com, and its route j matches Exact /e<j> (j%3 == 0),
// PathPrefix /p<j> (j%3 == 1), or PathPrefix /h<j> with the header
// x-route: <j> (j%3 == 2), as ghost's own benchmark (ghost/bench/gen.py).
// With policy every route names Policy.
func Document(vhosts, routes int, ep ghostjson.Endpoint, policy bool) *ghostjson.Document {
	const backend = "bench/origin:80"
	d := &ghostjson.Document{
		Version:  ghostjson.Version,
		Backends: []ghostjson.Backend{{Name: backend, Endpoints: []ghostjson.Endpoint{ep}}},
	}
	cache := ""
	if policy {
		d.CachePolicies = []ghostjson.CachePolicy{Policy}
		cache = Policy.Name
	}
	for i := range vhosts {
		vh := ghostjson.VHost{Hostname: fmt.Sprintf("v%d.example.com", i), Listeners: []string{Socket}}
		for j := range routes {
			m := ghostjson.Match{Path: ghostjson.PathMatch{Type: ghostjson.PathPrefix, Value: fmt.Sprintf("/p%d", j)}}
			switch j % 3 {
			case 0:
				m.Path = ghostjson.PathMatch{Type: ghostjson.PathExact, Value: fmt.Sprintf("/e%d", j)}
			case 2:
				m.Path.Value = fmt.Sprintf("/h%d", j)
				m.Headers = []ghostjson.ValueMatch{{Type: "Exact", Name: "x-route", Value: strconv.Itoa(j)}}
			}
			vh.Routes = append(vh.Routes, ghostjson.Route{
				Name:     fmt.Sprintf("bench/v%d/%d/0", i, j),
				Match:    m,
				Backends: []ghostjson.BackendGroup{{Backend: backend, Weight: 1}},
				Cache:    cache,
			})
		}
		d.VHosts = append(d.VHosts, vh)
	}
	return d
}
