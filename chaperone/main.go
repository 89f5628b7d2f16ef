// Command chaperone is varnishgw's in-pod agent: it runs and steers varnishd
// (supervise mode, the default: it is the container's entrypoint) or steers
// a varnishd another container runs (sidecar mode). It hot-reloads main.vcl,
// serves /healthz, /readyz and /metrics, notices cache child restarts, and
// on SIGTERM (or, in sidecar mode, a request on its drain socket) drains
// client sessions before stopping varnishd.
//
// `chaperone drain` is the client of the drain socket: the preStop hook of
// the varnish container in sidecar mode.
//
// The routing half (ghost.json from Gateway API objects, ghost reloads,
// Gateway status) plugs in through the routingHalf interface
// (chaperone/internal/routingsync); --routing chooses it (see newRouting
// and design/chaperone.md).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"strings"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"k8s.io/klog/v2"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/apiwatch"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/dnswatch"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/routingsync"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/tlssource"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/vcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gatewaystatus"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// newRouting builds the routing half --routing names: routingsync.FileRouting
// (ghost.json written by someone else), or a routingsync.Routing fed by the
// Gateway's objects through informers or by a standalone directory. With
// --routing=kubernetes and --vcl="" the Agent also loads main.vcl from the
// Gateway's VCL ConfigMap (gwruntime.VCLConfigMapName).
//
// With HTTPS ports (--tls-listen) it also returns where their certificates
// come from: the Secrets the Gateway names, through the API
// (tlssource.Kube, and the listeners' ResolvedRefs condition) or from the
// routing directory (tlssource.Dir).
func newRouting(cfg *Config, logger *slog.Logger) (routingHalf, *Halves, error) {
	// Each package names its own component (routingsync, vcl,
	// gatewaystatus).
	log := logger
	switch cfg.RoutingSource {
	case RoutingKubernetes:
		rc, err := kubeConfig(cfg.Kubeconfig)
		if err != nil {
			return nil, nil, err
		}
		// Every request of the clients below goes through the monitor:
		// a broken watch is logged once, its recovery once, and the sync
		// age is a metric (design/chaperone.md, "The Kubernetes API").
		// The routes' status writer is the exception: a route the pods may
		// not write (without the route status Role) answers 403 by design, which is no broken watch,
		// and an outage shows in the informers' requests anyway.
		routesClient, err := gatewayclient.NewForConfig(rest.CopyConfig(rc))
		if err != nil {
			return nil, nil, fmt.Errorf("gateway API client for route status: %w", err)
		}
		api := apiwatch.New(logger)
		rc.Wrap(api.WrapTransport)
		kube, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, nil, fmt.Errorf("kubernetes client: %w", err)
		}
		gw, err := gatewayclient.NewForConfig(rc)
		if err != nil {
			return nil, nil, fmt.Errorf("gateway API client: %w", err)
		}
		dyn, err := dynamic.NewForConfig(rc)
		if err != nil {
			return nil, nil, fmt.Errorf("dynamic client: %w", err)
		}
		ns, name, _ := strings.Cut(cfg.Gateway, "/")
		// ExternalName Services, when the class allows them: their names
		// are resolved by the pod's DNS servers (design/chaperone.md).
		var names *dnswatch.Watcher
		if cfg.ExternalNameServices {
			refuse, err := dnswatch.ParseRefuse(cfg.ExternalNameRefuse)
			if err != nil {
				return nil, nil, fmt.Errorf("--external-name-refuse: %w", err)
			}
			if names, err = dnswatch.New(dnswatch.Config{Servers: cfg.DNSServers, Refuse: &refuse, Logger: log}); err != nil {
				return nil, nil, fmt.Errorf("--external-name-services: %w", err)
			}
			log.Info("ExternalName Services are resolved", "dns_servers", names.Servers(), "refused_prefixes", cfg.ExternalNameRefuse)
		}
		src, err := routingsync.NewKubeSource(routingsync.KubeConfig{Client: kube, Gateway: gw, Dynamic: dyn, Namespace: ns, Name: name,
			ExternalNames: names, Logger: log})
		if err != nil {
			return nil, nil, fmt.Errorf("watch Gateway %s: %w", cfg.Gateway, err)
		}
		gwRef := object.Ref{Namespace: ns, Name: name}
		a := &routingsync.Routing{
			Source: src,
			Status: gatewaystatus.NewWriter(gw, ns, name, log),
			// The routes' status between applies (design/routing-sync.md,
			// "Status").
			AttachedRoutes: gatewaystatus.NewAttachedRoutesWriter(gw, ns, name, log),
			Routes:         gatewaystatus.NewRouteWriter(routesClient, object.Ref{Namespace: ns, Name: name}, gwruntime.ControllerName, log),
			Reporter:       vgwapi.NewReporter(dyn, gwRef, vgwapi.Pod{Name: cfg.PodName, UID: cfg.PodUID}, log.With("component", "report")),
			API:            api,
		}
		if names != nil {
			a.Collectors = append(a.Collectors, names)
		}
		if cfg.VCLPath == "" {
			// main.vcl from the Gateway's VCL ConfigMap, through the API
			// (no kubelet volume delay).
			a.VCL = &vcl.KubeSource{Client: kube, Gateway: gw, Namespace: ns, Name: name, Logger: log}
		}
		var tls *TLSHalf
		if len(cfg.TLSPorts) > 0 {
			tls = &TLSHalf{
				Source: &tlssource.Kube{Client: kube, Gateway: gw, Namespace: ns, Name: name, Logger: log},
				Status: gatewaystatus.NewListenerWriter(gw, ns, name, log),
				// The ListenerSets' HTTPS listeners: their status is the
				// ListenerSets'.
				ListenerSets: gatewaystatus.NewListenerSetWriter(gw, gwRef, log),
			}
		}
		// Cache invalidations (design/routing-sync.md) have clients of their
		// own, through the same monitor: the invalidation endpoint's waits
		// poll the API and must not use up the client-side rate limit of
		// the routing's requests.
		irc := rest.CopyConfig(rc)
		irc.QPS, irc.Burst = 20, 40
		ikube, err := kubernetes.NewForConfig(irc)
		if err != nil {
			return nil, nil, fmt.Errorf("kubernetes client: %w", err)
		}
		idyn, err := dynamic.NewForConfig(irc)
		if err != nil {
			return nil, nil, fmt.Errorf("dynamic client: %w", err)
		}
		cacheHalf := &CacheHalf{Kube: ikube, Dynamic: idyn, Gateway: gwRef, Pod: vgwapi.Pod{Name: cfg.PodName, UID: cfg.PodUID}}
		return a, &Halves{TLS: tls, Cache: cacheHalf}, nil
	case RoutingDir:
		var tls *TLSHalf
		if len(cfg.TLSPorts) > 0 {
			tls = &TLSHalf{Source: tlssource.NewDir(cfg.RoutingDir, log)}
		}
		return &routingsync.Routing{Source: routingsync.NewDirSource(cfg.RoutingDir, log)}, &Halves{TLS: tls}, nil
	default:
		return &routingsync.FileRouting{}, nil, nil
	}
}

// kubeConfig loads path, or the pod's service account when path is empty.
func kubeConfig(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig is empty and the pod's service account is not usable: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig=%s: %w", path, err)
	}
	return cfg, nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "drain" {
		os.Exit(drainCommand(os.Args[2:], os.Environ(), os.Stdout, os.Stderr))
	}
	cfg, err := ParseConfig(os.Args[1:], os.Environ(), os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaperone:", err)
		os.Exit(2)
	}
	logger := slog.New(newLogHandler(os.Stderr, cfg.Level))
	slog.SetDefault(logger)
	// client-go logs through klog, in text, once per retry of a failed
	// watch: as JSON records at DEBUG (the apiwatch monitor says what an
	// operator needs once).
	klog.SetSlogLogger(slog.New(atLevel{logger.Handler().WithAttrs([]slog.Attr{slog.String("component", "client-go")}), slog.LevelDebug}))
	routing, halves, err := newRouting(cfg, logger)
	if err != nil {
		logger.Error("chaperone failed", "error", err)
		os.Exit(1)
	}
	if err := Run(context.Background(), cfg, routing, halves, logger, notifySignals()); err != nil {
		logger.Error("chaperone failed", "error", err)
		os.Exit(1)
	}
}
