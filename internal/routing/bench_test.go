package routing

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

const (
	benchRoutes    = 10000
	benchHosts     = 1000
	benchWildcard  = 10 // routes on *.example.com, present in every vhost
	benchServices  = 5000
	benchEndpoints = 10 // per Service: 50,000 endpoints in all
)

// benchInput builds a Gateway with two sockets, 10,000 attached routes (two
// matches each) over 1,000 hostnames, and 5,000 Services with 10 ready
// endpoints each (50,000 endpoints, a quarter of them IPv6).
func benchInput(b *testing.B) (*gatewayv1.Gateway, []*Fragment, *Objects) {
	b.Helper()
	gw := gateway(fromNS(listener("http", 80, ""), gatewayv1.NamespacesFromAll, nil), fromNS(listener("alt", 8080, "*.example.com"), gatewayv1.NamespacesFromAll, nil))
	objs := &Objects{}
	for s := 0; s < benchServices; s++ {
		ns := fmt.Sprintf("ns%d", s%50)
		name := fmt.Sprintf("svc%d", s)
		objs.Services = append(objs.Services, service(ns, name, corev1.ServicePort{Name: "http", Port: 80}))
		v4 := slice(ns, name, name+"-v4", discoveryv1.AddressTypeIPv4, "http", 8080)
		v6 := slice(ns, name, name+"-v6", discoveryv1.AddressTypeIPv6, "http", 8080)
		for e := 0; e < benchEndpoints; e++ {
			if e%4 == 3 {
				v6.Endpoints = append(v6.Endpoints, ep(ptr(true), fmt.Sprintf("fd00::%x:%x", s, e)))
			} else {
				v4.Endpoints = append(v4.Endpoints, ep(nil, fmt.Sprintf("10.%d.%d.%d", s/256, s%256, e+1)))
			}
		}
		objs.EndpointSlices = append(objs.EndpointSlices, v4, v6)
	}
	var frags []*Fragment
	for i := 0; i < benchRoutes; i++ {
		s := i % benchServices
		host := fmt.Sprintf("h%d.example.com", i%benchHosts)
		if i < benchWildcard {
			host = "*.example.com"
		}
		r := route(fmt.Sprintf("ns%d", s%50), fmt.Sprintf("route%d", i), hostnames(host), created(time.Duration(i%100)*time.Second),
			rules(gatewayv1.HTTPRouteRule{
				Matches:     []gatewayv1.HTTPRouteMatch{prefix(fmt.Sprintf("/app%d", i)), exact(fmt.Sprintf("/app%d/health", i))},
				BackendRefs: []gatewayv1.HTTPBackendRef{backend("", fmt.Sprintf("svc%d", s), 80, nil)},
			}))
		f, err := Attach(gw, r, objs)
		if err != nil || !f.Accepted() {
			b.Fatalf("attach %s: %v %+v", r.Name, err, f.Parents)
		}
		frags = append(frags, f)
	}
	return gw, frags, objs
}

// BenchmarkMergeResolve is the chaperone's work on every change: merge
// 10,000 route fragments, resolve 50,000 endpoints and encode ghost.json
// (to a counting writer: the file write itself is not measured).
func BenchmarkMergeResolve(b *testing.B) {
	gw, frags, objs := benchInput(b)
	var size int
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	defer func() {
		// CPU time (all threads, GC included) is less sensitive than wall
		// time to other load on a shared machine.
		b.ReportMetric(float64(processCPU()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	}()
	for b.Loop() {
		tb, err := Merge(gw, frags)
		if err != nil {
			b.Fatal(err)
		}
		doc, err := Resolve(tb, objs)
		if err != nil {
			b.Fatal(err)
		}
		var w countingWriter
		if err := ghostjson.Encode(&w, doc); err != nil {
			b.Fatal(err)
		}
		size = int(w)
	}
	b.ReportMetric(float64(size), "ghost.json-bytes")
}

type countingWriter int

func (w *countingWriter) Write(p []byte) (int, error) {
	*w += countingWriter(len(p))
	return len(p), nil
}

// BenchmarkMergeResolveMarshal is BenchmarkMergeResolve with the document
// returned as one []byte (ghostjson.Marshal).
func BenchmarkMergeResolveMarshal(b *testing.B) {
	gw, frags, objs := benchInput(b)
	var size int
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tb, err := Merge(gw, frags)
		if err != nil {
			b.Fatal(err)
		}
		doc, err := Resolve(tb, objs)
		if err != nil {
			b.Fatal(err)
		}
		out, err := ghostjson.Marshal(doc)
		if err != nil {
			b.Fatal(err)
		}
		size = len(out)
	}
	b.ReportMetric(float64(size), "ghost.json-bytes")
}

// BenchmarkMerge is the merge step alone.
func BenchmarkMerge(b *testing.B) {
	gw, frags, _ := benchInput(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Merge(gw, frags); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolve is the resolve step alone, without writing JSON.
func BenchmarkResolve(b *testing.B) {
	gw, frags, objs := benchInput(b)
	tb, err := Merge(gw, frags)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Resolve(tb, objs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAttach is the provider's work for one route against the
// benchmark's Gateway and 5,000 Services.
func BenchmarkAttach(b *testing.B) {
	gw, _, objs := benchInput(b)
	r := route("ns1", "route1", hostnames("h1.example.com"), rules(gatewayv1.HTTPRouteRule{
		Matches:     []gatewayv1.HTTPRouteMatch{prefix("/app1"), exact("/app1/health")},
		BackendRefs: []gatewayv1.HTTPBackendRef{backend("", "svc1", 80, nil)},
	}))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Attach(gw, r, objs); err != nil {
			b.Fatal(err)
		}
	}
}
