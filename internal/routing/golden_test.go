package routing_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routingfragment"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/golden")

// TestGolden translates the Gateway API objects of each case of
// testdata/golden the way the product does and compares the results with
// the case's golden files; -update rewrites them. A case is a folder:
//
//   - in.yaml: GatewayClasses, their parameters ConfigMaps, Gateways (with
//     the annotations the provider writes: cache policy, escaped slashes),
//     ListenerSets, HTTPRoutes, Namespaces, Services, EndpointSlices and
//     ReferenceGrants, several YAML documents, as the provider writes them
//     (a parentRef of kind ListenerSet names its group, which the CRD
//     defaults and Attach needs);
//   - rule-caches.yaml (optional): the cache blocks of route rules, which
//     live in the provider's schema, not in the HTTPRoute: namespace/route
//     to rule index to a routing.CachePolicy;
//   - dns.yaml (optional): the addresses the pods' lookups of ExternalName
//     Services' names return.
//
// The outputs are what the provider and the pods make of them:
//
//   - fragments.yaml: the RoutingFragments the provider writes at apply
//     (routing.Attach per route and served parent Gateway, the rules'
//     cache blocks, vgwapi.NewFragment; without the provider's
//     app.kubernetes.io/managed-by label), sorted by namespace and name;
//   - <namespace>.<gateway>.ghost.json: the ghost.json the Gateway's pods
//     write from those fragments (vgwapi.ReadFragments) and the objects
//     (routing.WithListenerSetListeners, Merge, Resolve: the chaperone's
//     routing sync; ghostjson.Marshal);
//   - status.yaml: the listeners' attachedRoutes, the ListenerSets'
//     conditions and the routes' parent conditions (the provider's, with
//     the pods' ResolvedRefs);
//   - errors.txt: what fails the plan (validation errors name the field),
//     fragments the pods reject and the conflicts Merge reports.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no cases in testdata/golden: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			in, err := readCase(dir)
			if err != nil {
				t.Fatal(err)
			}
			got, err := translate(in)
			if err != nil {
				t.Fatal(err)
			}
			compareGolden(t, dir, got)
		})
	}
}

// goldenOutput reports whether name is an output file of a case.
func goldenOutput(name string) bool {
	return name == "fragments.yaml" || name == "status.yaml" || name == "errors.txt" || strings.HasSuffix(name, ".ghost.json")
}

func compareGolden(t *testing.T, dir string, got map[string][]byte) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, ok := got[e.Name()]; ok || !goldenOutput(e.Name()) {
			continue
		}
		if *update {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s: golden file the translation no longer writes (go test -run TestGolden -update removes it)", e.Name())
	}
	for _, name := range slices.Sorted(mapKeys(got)) {
		path := filepath.Join(dir, name)
		if *update {
			if err := os.WriteFile(path, got[name], 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v (go test -run TestGolden -update writes it)", name, err)
			continue
		}
		if !bytes.Equal(want, got[name]) {
			t.Errorf("%s differs from the golden file (-want +got; go test -run TestGolden -update rewrites it):\n%s", name, cmp.Diff(string(want), string(got[name])))
		}
	}
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// goldenCase holds the objects of a case.
type goldenCase struct {
	classes        []*gatewayv1.GatewayClass
	configMaps     []*corev1.ConfigMap
	gateways       []*gatewayv1.Gateway
	sets           []*gatewayv1.ListenerSet
	routes         []*gatewayv1.HTTPRoute
	namespaces     []*corev1.Namespace
	services       []*corev1.Service
	endpointSlices []*discoveryv1.EndpointSlice
	grants         []*gatewayv1.ReferenceGrant
	// ruleCaches: namespace/route, then rule index.
	ruleCaches map[string]map[int]*routing.CachePolicy
	dns        map[string][]netip.Addr
}

var yamlSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

func readCase(dir string) (*goldenCase, error) {
	data, err := os.ReadFile(filepath.Join(dir, "in.yaml"))
	if err != nil {
		return nil, err
	}
	c := &goldenCase{}
	for i, doc := range yamlSeparator.Split(string(data), -1) {
		var head metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, fmt.Errorf("in.yaml document %d: %w", i, err)
		}
		if head.Kind == "" && strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		into := func(apiVersion string, v any) error {
			if head.APIVersion != apiVersion {
				return fmt.Errorf("in.yaml document %d: %s has apiVersion %q, want %q", i, head.Kind, head.APIVersion, apiVersion)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), v); err != nil {
				return fmt.Errorf("in.yaml document %d (%s): %w", i, head.Kind, err)
			}
			return nil
		}
		gw := gatewayv1.GroupVersion.String()
		switch head.Kind {
		case "GatewayClass":
			err = decodeInto(into, gw, &c.classes)
		case "Gateway":
			err = decodeInto(into, gw, &c.gateways)
		case "ListenerSet":
			err = decodeInto(into, gw, &c.sets)
		case "HTTPRoute":
			err = decodeInto(into, gw, &c.routes)
		case "ReferenceGrant":
			err = decodeInto(into, gw, &c.grants)
		case "ConfigMap":
			err = decodeInto(into, "v1", &c.configMaps)
		case "Namespace":
			err = decodeInto(into, "v1", &c.namespaces)
		case "Service":
			err = decodeInto(into, "v1", &c.services)
		case "EndpointSlice":
			err = decodeInto(into, discoveryv1.SchemeGroupVersion.String(), &c.endpointSlices)
		default:
			err = fmt.Errorf("in.yaml document %d: kind %q is not an input of the translation", i, head.Kind)
		}
		if err != nil {
			return nil, err
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "rule-caches.yaml")); err == nil {
		if err := yaml.UnmarshalStrict(data, &c.ruleCaches); err != nil {
			return nil, fmt.Errorf("rule-caches.yaml: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if data, err := os.ReadFile(filepath.Join(dir, "dns.yaml")); err == nil {
		if err := yaml.UnmarshalStrict(data, &c.dns); err != nil {
			return nil, fmt.Errorf("dns.yaml: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return c, nil
}

func decodeInto[T any](into func(string, any) error, apiVersion string, list *[]*T) error {
	v := new(T)
	if err := into(apiVersion, v); err != nil {
		return err
	}
	*list = append(*list, v)
	return nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// classKeyExternalNames is the key of a varnishgw GatewayClass's
// parameters ConfigMap that lets its routes name ExternalName Services
// (the class's external_name_services).
const classKeyExternalNames = "external-name-services"

// servedGateway is a Gateway of a varnishgw class.
type servedGateway struct {
	gw *gatewayv1.Gateway
	// externalNames: its class allows ExternalName Services.
	externalNames bool
}

// translate runs the provider's and the pods' steps over c and returns the
// output files.
func translate(c *goldenCase) (map[string][]byte, error) {
	var problems []string
	out := map[string][]byte{}

	// The provider: the Gateways and ListenerSets it would write.
	served := map[object.Ref]*servedGateway{}
	for _, gw := range sortedByName(c.gateways) {
		ref := object.Ref{Namespace: gw.Namespace, Name: gw.Name}
		class := findClass(c.classes, string(gw.Spec.GatewayClassName))
		if class == nil || class.Spec.ControllerName != gwruntime.ControllerName {
			continue
		}
		if errs := append(routing.ValidateGateway(gw), routing.ValidateAllowedListeners(gw)...); len(errs) > 0 {
			for _, e := range errs {
				problems = append(problems, fmt.Sprintf("plan: Gateway %s: %v", ref, e))
			}
			continue
		}
		served[ref] = &servedGateway{gw: gw, externalNames: classAllowsExternalNames(class, c.configMaps)}
	}
	var sets []*gatewayv1.ListenerSet
	for _, ls := range sortedByName(c.sets) {
		if errs := routing.ValidateListenerSet(ls); len(errs) > 0 {
			for _, e := range errs {
				problems = append(problems, fmt.Sprintf("plan: ListenerSet %s/%s: %v", ls.Namespace, ls.Name, e))
			}
			continue
		}
		sets = append(sets, ls)
	}
	planObjs := &routing.Objects{Namespaces: c.namespaces, Services: c.services, ReferenceGrants: c.grants, ListenerSets: sets}

	// The provider: each route's fragments, one per served parent Gateway.
	var stored []*unstructured.Unstructured
	var planned []*routing.Fragment
	for _, route := range sortedByName(c.routes) {
		name := route.Namespace + "/" + route.Name
		if errs := routing.ValidateHTTPRoute(route); len(errs) > 0 {
			for _, e := range errs {
				problems = append(problems, fmt.Sprintf("plan: HTTPRoute %s: %v", name, e))
			}
			continue
		}
		for _, ref := range parentGateways(route, c.sets) {
			p := served[ref]
			if p == nil {
				continue
			}
			f, err := routing.Attach(p.gw, route, planObjs.WithExternalNameServices(p.externalNames))
			if errors.Is(err, routing.ErrNotParent) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("attach HTTPRoute %s to Gateway %s: %w", name, ref, err)
			}
			for j := range f.Rules {
				f.Rules[j].Cache = c.ruleCaches[name][f.Rules[j].Index]
			}
			obj, err := routingfragment.New(f)
			if err != nil {
				return nil, err
			}
			stored = append(stored, obj)
			planned = append(planned, f)
		}
	}
	slices.SortFunc(stored, func(a, b *unstructured.Unstructured) int {
		return strings.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
	})
	if len(stored) > 0 {
		var b bytes.Buffer
		for i, obj := range stored {
			if i > 0 {
				b.WriteString("---\n")
			}
			y, err := yaml.Marshal(obj.Object)
			if err != nil {
				return nil, err
			}
			b.Write(y)
		}
		out["fragments.yaml"] = b.Bytes()
	}

	// The pods of each served Gateway.
	var status goldenStatus
	for _, ref := range slices.SortedFunc(mapKeys(served), compareRefs) {
		p := served[ref]
		// The Gateway as the pods read it: with the ListenerSet listeners
		// the provider records in its annotation.
		composed := routing.ComposeGateway(p.gw, sets, &routing.Objects{Namespaces: c.namespaces, ReferenceGrants: c.grants})
		recorded, err := composed.ListenerSetListeners()
		if err != nil {
			return nil, err
		}
		gw := p.gw.DeepCopy()
		if recorded != "" {
			if gw.Annotations == nil {
				gw.Annotations = map[string]string{}
			}
			gw.Annotations[routing.ListenerSetListenersAnnotation] = recorded
		}
		// The RoutingFragments of the Gateway, as the API server returns them.
		var objs []*unstructured.Unstructured
		for _, obj := range stored {
			if obj.GetNamespace() != ref.Namespace || !hasLabels(obj, gwruntime.GatewayLabels(ref)) {
				continue
			}
			data, err := json.Marshal(obj.Object)
			if err != nil {
				return nil, err
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(data); err != nil {
				return nil, err
			}
			objs = append(objs, u)
		}
		frags, rejected := routingfragment.ReadAll(ref, objs)
		for _, r := range rejected {
			problems = append(problems, fmt.Sprintf("pods of Gateway %s: RoutingFragment %s rejected: %s", ref, r.Name, r.Reason))
		}
		podObjs := &routing.Objects{Services: c.services, EndpointSlices: c.endpointSlices, ReferenceGrants: c.grants}
		if p.externalNames {
			podObjs.ExternalNameServices = true
			podObjs.ExternalNames = c.dns
		}
		withSets, err := routing.WithListenerSetListeners(gw)
		if err != nil {
			return nil, err
		}
		table, err := routing.Merge(withSets, frags)
		if err != nil {
			return nil, fmt.Errorf("merge the fragments of Gateway %s: %w", ref, err)
		}
		for _, cf := range table.Conflicts {
			problems = append(problems, fmt.Sprintf("pods of Gateway %s: conflict: %s", ref, cf))
		}
		doc, err := routing.Resolve(table, podObjs)
		if err != nil {
			return nil, fmt.Errorf("resolve the backends of Gateway %s: %w", ref, err)
		}
		data, err := ghostjson.Marshal(doc)
		if err != nil {
			return nil, err
		}
		out[ref.Namespace+"."+ref.Name+".ghost.json"] = data
		status.add(ref, withSets, composed, frags, planned, podObjs)
	}
	if len(status.Gateways) > 0 || len(status.Routes) > 0 {
		data, err := yaml.Marshal(status)
		if err != nil {
			return nil, err
		}
		out["status.yaml"] = data
	}
	if len(problems) > 0 {
		out["errors.txt"] = []byte(strings.Join(problems, "\n") + "\n")
	}
	return out, nil
}

// parentGateways are the distinct Gateways the route's parentRefs name,
// directly or through a ListenerSet of sets, sorted.
func parentGateways(route *gatewayv1.HTTPRoute, sets []*gatewayv1.ListenerSet) []object.Ref {
	var out []object.Ref
	for _, p := range route.Spec.ParentRefs {
		if p.Group != nil && *p.Group != gatewayv1.GroupName {
			continue
		}
		ref := object.Ref{Namespace: route.Namespace, Name: string(p.Name)}
		if p.Namespace != nil {
			ref.Namespace = string(*p.Namespace)
		}
		switch {
		case p.Kind == nil || *p.Kind == "Gateway":
		case *p.Kind == "ListenerSet":
			i := slices.IndexFunc(sets, func(ls *gatewayv1.ListenerSet) bool { return ls.Namespace == ref.Namespace && ls.Name == ref.Name })
			if i < 0 {
				continue
			}
			gw, ok := routing.ListenerSetParent(sets[i])
			if !ok {
				continue
			}
			ref = gw
		default:
			continue
		}
		if !slices.Contains(out, ref) {
			out = append(out, ref)
		}
	}
	slices.SortFunc(out, compareRefs)
	return out
}

func hasLabels(obj *unstructured.Unstructured, want map[string]string) bool {
	got := obj.GetLabels()
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func compareRefs(a, b object.Ref) int { return strings.Compare(a.String(), b.String()) }

func findClass(classes []*gatewayv1.GatewayClass, name string) *gatewayv1.GatewayClass {
	for _, gc := range classes {
		if gc.Name == name {
			return gc
		}
	}
	return nil
}

// classAllowsExternalNames reads external_name_services from the class's
// parameters ConfigMap, as the provider does.
func classAllowsExternalNames(gc *gatewayv1.GatewayClass, cms []*corev1.ConfigMap) bool {
	ref := gc.Spec.ParametersRef
	if ref == nil || ref.Kind != "ConfigMap" || ref.Group != "" || ref.Namespace == nil {
		return false
	}
	for _, cm := range cms {
		if cm.Namespace == string(*ref.Namespace) && cm.Name == ref.Name {
			return cm.Data[classKeyExternalNames] == "true"
		}
	}
	return false
}

func sortedByName[T any, P interface {
	*T
	metav1.Object
}](list []P) []P {
	out := slices.Clone(list)
	slices.SortStableFunc(out, func(a, b P) int {
		return strings.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
	})
	return out
}

// goldenStatus is status.yaml.
type goldenStatus struct {
	Gateways []gatewayStatus `json:"gateways,omitempty"`
	Routes   []routeStatus   `json:"routes,omitempty"`
}

type gatewayStatus struct {
	Gateway string `json:"gateway"`
	// Listeners are the served listeners, ListenerSets' included (named
	// by routing.ListenerSetListenerKey), with their attachedRoutes.
	Listeners    []listenerStatus    `json:"listeners"`
	ListenerSets []listenerSetStatus `json:"listenerSets,omitempty"`
}

type listenerStatus struct {
	Name           string `json:"name"`
	AttachedRoutes int32  `json:"attachedRoutes"`
}

type listenerSetStatus struct {
	ListenerSet string                `json:"listenerSet"`
	Conditions  []routing.Condition   `json:"conditions"`
	Listeners   []listenerEntryStatus `json:"listeners,omitempty"`
}

type listenerEntryStatus struct {
	Name       string              `json:"name"`
	Port       int32               `json:"port"`
	Conditions []routing.Condition `json:"conditions"`
}

type routeStatus struct {
	Route   string                 `json:"route"`
	Gateway string                 `json:"gateway"`
	Parents []routing.ParentStatus `json:"parents"`
}

// add records the status of Gateway ref: its listeners' attached routes
// (what the pods count from the fragments they serve), its ListenerSets'
// results (the provider's) and the parents of the routes planned for it,
// with the ResolvedRefs condition the pods write.
func (s *goldenStatus) add(ref object.Ref, gw *gatewayv1.Gateway, composed *routing.ComposedGateway, served, planned []*routing.Fragment, objs *routing.Objects) {
	counts := routing.ListenerAttachedRoutes(served)
	g := gatewayStatus{Gateway: ref.String(), Listeners: []listenerStatus{}}
	for _, l := range gw.Spec.Listeners {
		g.Listeners = append(g.Listeners, listenerStatus{Name: string(l.Name), AttachedRoutes: counts[string(l.Name)]})
	}
	for _, r := range composed.ListenerSets {
		ls := listenerSetStatus{ListenerSet: r.Set.String(), Conditions: r.Conditions}
		for _, l := range r.Listeners {
			ls.Listeners = append(ls.Listeners, listenerEntryStatus{Name: l.Name, Port: l.Port, Conditions: l.Conditions})
		}
		g.ListenerSets = append(g.ListenerSets, ls)
	}
	s.Gateways = append(s.Gateways, g)
	for _, f := range planned {
		if f.Gateway != ref {
			continue
		}
		rs := routeStatus{Route: f.Route.String(), Gateway: ref.String()}
		refs, podsWrite := f.ResolvedRefs(objs)
		for _, p := range f.Parents {
			p.Conditions = slices.Clone(p.Conditions)
			for k := range p.Conditions {
				if podsWrite && p.Conditions[k].Type == refs.Type {
					p.Conditions[k] = refs
				}
			}
			rs.Parents = append(rs.Parents, p)
		}
		s.Routes = append(s.Routes, rs)
	}
}
