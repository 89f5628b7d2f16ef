package routingsync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/fsnotify/fsnotify"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// Standalone directory layout (design/routing-sync.md):
const (
	// GatewayFile holds the Gateway (YAML or JSON); gateway.yml and
	// gateway.json are accepted too. Required.
	GatewayFile = "gateway.yaml"
	// FragmentSuffix ends the name of each fragment file
	// (routing.MarshalFragment's JSON).
	FragmentSuffix = ".fragment.json"
	// EndpointsFile maps "namespace/service:port" to endpoint addresses
	// ("ip:port", "[ipv6]:port"); each key becomes a Service port and
	// ready EndpointSlice endpoints.
	EndpointsFile = "endpoints.yaml"
)

// DirSource reads the routing state of one Gateway from a directory, for
// running ghost without Kubernetes: see the layout constants. Every other
// *.yaml, *.yml or *.json file holds Kubernetes objects (several YAML
// documents allowed) of kind Service, EndpointSlice, ReferenceGrant or
// Secret (the certificates of HTTPS listeners, State.Secrets).
// Names starting with "." (editor temporaries, the "..data" symlink of a
// Kubernetes ConfigMap volume) and ending in "~", ".swp" or ".tmp" are
// ignored.
//
// The directory (not the files) is watched with fsnotify and every event
// re-reads everything, so that editors that save by rename and the atomic
// "..data" symlink swap of ConfigMap volumes both work.
type DirSource struct {
	dir string
	log *slog.Logger
}

// NewDirSource returns a Source for the directory dir.
func NewDirSource(dir string, log *slog.Logger) *DirSource {
	if log == nil {
		log = slog.Default()
	}
	return &DirSource{dir: dir, log: log.With("component", "routingsync", "dir", dir)}
}

// Run implements Source.
func (d *DirSource) Run(ctx context.Context, changed func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", d.dir, err)
	}
	defer w.Close()
	if err := w.Add(d.dir); err != nil {
		return fmt.Errorf("watch %s: %w", d.dir, err)
	}
	changed()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("fsnotify watcher closed")
			}
			d.log.Debug("directory changed", "event", ev.String())
			changed()
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("fsnotify watcher closed")
			}
			// An overflow loses events: re-read everything.
			d.log.Warn("watch error; re-reading the directory", "error", err)
			changed()
		}
	}
}

func ignored(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") ||
		strings.HasSuffix(name, ".swp") || strings.HasSuffix(name, ".tmp")
}

// State implements Source: it reads the whole directory.
func (d *DirSource) State() (*State, error) {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("read routing directory: %w", err)
	}
	st := &State{Objects: &routing.Objects{}}
	var names []string
	for _, e := range ents {
		if !ignored(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	eps := map[string][]string{}
	var errs []error
	for _, name := range names {
		p := filepath.Join(d.dir, name)
		fi, err := os.Stat(p) // follows the symlinks of ConfigMap volumes
		if err != nil {
			if os.IsNotExist(err) {
				continue // removed while reading; another event follows
			}
			errs = append(errs, err)
			continue
		}
		if fi.IsDir() {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			if !os.IsNotExist(err) {
				errs = append(errs, err)
			}
			continue
		}
		switch {
		case name == GatewayFile || name == "gateway.yml" || name == "gateway.json":
			if st.Gateway != nil {
				errs = append(errs, fmt.Errorf("%s: a second Gateway file", name))
				continue
			}
			gw := &gatewayv1.Gateway{}
			if err := yaml.UnmarshalStrict(data, gw); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				continue
			}
			st.Gateway = gw
		case strings.HasSuffix(name, FragmentSuffix):
			f, err := routing.UnmarshalFragment(data)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				continue
			}
			st.Fragments = append(st.Fragments, f)
		case name == EndpointsFile || name == "endpoints.yml":
			if err := yaml.UnmarshalStrict(data, &eps); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		case strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") || strings.HasSuffix(name, ".json"):
			if err := decodeObjects(data, st.Objects, &st.Secrets); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
	}
	if st.Gateway == nil {
		errs = append(errs, fmt.Errorf("no %s in %s", GatewayFile, d.dir))
	}
	if err := addEndpoints(eps, st.Objects); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EndpointsFile, err))
	}
	if len(errs) > 0 {
		return &State{Gateway: st.Gateway, Secrets: st.Secrets}, fmt.Errorf("routing directory %s: %w", d.dir, errors.Join(errs...))
	}
	return st, nil
}

// decodeObjects adds the Services, EndpointSlices and ReferenceGrants of a
// YAML (several documents) or JSON file to objs, its Secrets to secrets.
func decodeObjects(data []byte, objs *routing.Objects, secrets *[]*corev1.Secret) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for i := 0; ; i++ {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); err != nil {
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 || string(raw.Raw) == "null" {
			continue
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(raw.Raw, &tm); err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
		var err error
		switch tm.Kind {
		case "Service":
			o := &corev1.Service{}
			if err = yaml.UnmarshalStrict(raw.Raw, o); err == nil {
				objs.Services = append(objs.Services, o)
			}
		case "EndpointSlice":
			o := &discoveryv1.EndpointSlice{}
			if err = yaml.UnmarshalStrict(raw.Raw, o); err == nil {
				objs.EndpointSlices = append(objs.EndpointSlices, o)
			}
		case "ReferenceGrant":
			o := &gatewayv1.ReferenceGrant{}
			if err = yaml.UnmarshalStrict(raw.Raw, o); err == nil {
				objs.ReferenceGrants = append(objs.ReferenceGrants, o)
			}
		case "Secret":
			o := &corev1.Secret{}
			if err = yaml.UnmarshalStrict(raw.Raw, o); err == nil {
				// stringData, as the API server would store it
				for k, v := range o.StringData {
					if o.Data == nil {
						o.Data = map[string][]byte{}
					}
					o.Data[k] = []byte(v)
				}
				*secrets = append(*secrets, o)
			}
		default:
			return fmt.Errorf("document %d: kind %q: want Service, EndpointSlice, ReferenceGrant or Secret", i, tm.Kind)
		}
		if err != nil {
			return fmt.Errorf("document %d (%s): %w", i, tm.Kind, err)
		}
	}
}

// addEndpoints turns the endpoints file's map into Services (one port per
// key, named "port-N") and ready EndpointSlices (one per target port).
func addEndpoints(eps map[string][]string, objs *routing.Objects) error {
	keys := make([]string, 0, len(eps))
	for k := range eps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	svcs := map[string]*corev1.Service{}
	var errs []error
	for _, key := range keys {
		nsName, portStr, ok := strings.Cut(key, ":")
		ns, name, ok2 := strings.Cut(nsName, "/")
		port, perr := strconv.ParseInt(portStr, 10, 32)
		if !ok || !ok2 || ns == "" || name == "" || perr != nil || port < 1 || port > 65535 {
			errs = append(errs, fmt.Errorf("key %q: want namespace/service:port", key))
			continue
		}
		portName := "port-" + portStr
		svc := svcs[nsName]
		if svc == nil {
			svc = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			svcs[nsName] = svc
			objs.Services = append(objs.Services, svc)
		}
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: portName, Port: int32(port), Protocol: corev1.ProtocolTCP})
		byPort := map[int32][]discoveryv1.Endpoint{}
		byFamily := map[int32]discoveryv1.AddressType{}
		for _, ep := range eps[key] {
			host, tp, err := net.SplitHostPort(ep)
			ip := net.ParseIP(host)
			target, perr := strconv.ParseInt(tp, 10, 32)
			if err != nil || ip == nil || perr != nil || target < 1 || target > 65535 {
				errs = append(errs, fmt.Errorf("key %q: endpoint %q: want ip:port or [ipv6]:port", key, ep))
				continue
			}
			// One slice per target port and address family.
			slot := int32(target)
			family := discoveryv1.AddressTypeIPv4
			if ip.To4() == nil {
				family = discoveryv1.AddressTypeIPv6
				slot = -slot
			}
			byFamily[slot] = family
			byPort[slot] = append(byPort[slot], discoveryv1.Endpoint{Addresses: []string{ip.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
		slots := make([]int32, 0, len(byPort))
		for s := range byPort {
			slots = append(slots, s)
		}
		sort.Slice(slots, func(i, j int) bool { return slots[i] < slots[j] })
		for _, s := range slots {
			objs.EndpointSlices = append(objs.EndpointSlices, &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%s-%d", name, portName, s),
					Labels: map[string]string{discoveryv1.LabelServiceName: name}},
				AddressType: byFamily[s],
				Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(max(s, -s)), Protocol: ptr.To(corev1.ProtocolTCP)}},
				Endpoints:   byPort[s],
			})
		}
	}
	return errors.Join(errs...)
}
