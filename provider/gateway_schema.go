package provider

import (
	"context"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// listenerTLSBlock is a listener's tls: how an HTTPS listener terminates
// TLS, and with which certificates. owner is the kind whose listener it
// is (Gateway or ListenerSet): a certificate_ref without namespace is in
// its namespace, and a ReferenceGrant must let objects of that kind
// reference Secrets elsewhere.
func listenerTLSBlock(owner string) schema.SingleNestedBlock {
	// A Gateway's plan checks the Secrets and ReferenceGrants (warnings);
	// for a ListenerSet's the gateway's pods report them in the listener's
	// status.
	missing := "is a warning at plan: the listener serves once it exists, without another apply."
	notPermitted := "the listener does not serve (a warning at plan)."
	if owner != "Gateway" {
		missing = "is served once it exists, without another apply; until then the gateway's pods set the " +
			"listener's ResolvedRefs condition to False with reason InvalidCertificateRef."
		notPermitted = "the listener is not served."
	}
	return schema.SingleNestedBlock{
		Description: "The TLS settings of an HTTPS listener (required with protocol = \"HTTPS\", not allowed with HTTP): " +
			"the gateway pod terminates TLS with the certificates of the certificate_ref blocks and hands the requests to " +
			"varnishd. The provider stores references to the Secrets, never their contents: private keys stay out of " +
			"Terraform's state and plans.",
		Attributes: map[string]schema.Attribute{
			"mode": schema.StringAttribute{
				Optional: true,
				Description: "Terminate (the default when unset): the gateway pod terminates TLS. Passthrough, which would " +
					"hand the encrypted connection to a backend, is not supported and is an error.",
			},
			"options": schema.MapAttribute{
				Optional: true, ElementType: types.StringType,
				Description: "Not supported yet: implementation-specific TLS options. Setting it is an error.",
			},
		},
		Blocks: map[string]schema.Block{
			"certificate_ref": schema.ListNestedBlock{
				Description: "A Secret of type kubernetes.io/tls with a certificate (chain) and its private key; at least " +
					"one, at most 64. With several, the gateway chooses by the name the client asks for (SNI), and the " +
					"first is the default. A Secret that does not exist yet (for example one cert-manager creates after " +
					"the Gateway) " + missing,
				Validators: []validator.List{listvalidator.SizeAtMost(64)},
				NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
					"group": schema.StringAttribute{Optional: true,
						Description: "The referent's API group: \"\" (core), the default. Any other group is an error."},
					"kind": schema.StringAttribute{Optional: true,
						Description: "The referent's kind: Secret, the default. Any other kind is an error."},
					"name": schema.StringAttribute{Required: true, Description: "The Secret's name."},
					"namespace": schema.StringAttribute{Optional: true,
						Description: "The Secret's namespace; the " + owner + "'s when unset. A Secret in another namespace needs a " +
							"ReferenceGrant there from " + owner + "s of the " + owner + "'s namespace to Secrets; without one the listener's " +
							"ResolvedRefs condition is False with reason RefNotPermitted and " + notPermitted},
				}},
			},
		},
	}
}

// secretRefBlock is a list block of Gateway API SecretObjectReferences (or
// ObjectReferences), declared for a field the provider rejects.
func secretRefBlock(desc string) schema.ListNestedBlock {
	return schema.ListNestedBlock{
		Description: desc,
		NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
			"group":     schema.StringAttribute{Optional: true, Description: "Not supported yet: the referent's API group."},
			"kind":      schema.StringAttribute{Optional: true, Description: "Not supported yet: the referent's kind."},
			"name":      schema.StringAttribute{Optional: true, Description: "Not supported yet: the referent's name."},
			"namespace": schema.StringAttribute{Optional: true, Description: "Not supported yet: the referent's namespace."},
		}},
	}
}

// frontendValidationBlock is a Gateway API FrontendTLSValidation, declared
// for a field the provider rejects.
func frontendValidationBlock() schema.SingleNestedBlock {
	return schema.SingleNestedBlock{
		Description: "Not supported yet: how client certificates are validated.",
		Attributes: map[string]schema.Attribute{
			"mode": schema.StringAttribute{Optional: true, Description: "Not supported yet: AllowValidOnly or AllowInsecureFallback."},
		},
		Blocks: map[string]schema.Block{
			"ca_certificate_ref": secretRefBlock("Not supported yet: a CA certificate that signs client certificates."),
		},
	}
}

func (r *gatewayResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A Gateway API Gateway served by varnishgw, and its runtime in the Gateway's namespace: a " +
			"ServiceAccount with least-privilege RBAC, a ConfigMap with main.vcl, a Deployment of gateway pods " +
			"(the chaperone running varnishd with the ghost VMOD, non-root and Pod Security \"restricted\" unless " +
			"sysctls needs more), a Service with one port per distinct listener port, and a PodDisruptionBudget. " +
			"VCL changes are hot-reloaded by the pods, only changes to what varnishd reads at start (image, " +
			"ports, storage, parameters, mode) and to the pod settings roll them, and HTTPS listeners terminate " +
			"TLS in the pods with the certificates of the Secrets they reference (never stored in Terraform's " +
			"state). The GatewayClass parameters are read when the gateway is planned and applied, so a class " +
			"changed in the same apply reaches its gateways with the next apply.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "The Gateway's namespace/name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"namespace": schema.StringAttribute{
				Required:      true,
				Description:   "The namespace of the Gateway and its runtime objects. It must exist. Changing it replaces the gateway.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:    []validator.String{stringvalidator.RegexMatches(dnsLabel, "must be a namespace name (a DNS label)")},
			},
			"name": schema.StringAttribute{
				Required:      true,
				Description:   "The name of the Gateway, a DNS subdomain. Changing it replaces the gateway.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators: []validator.String{
					stringvalidator.LengthBetween(1, 253),
					stringvalidator.RegexMatches(dnsSubdomain, "must be a lower-case DNS subdomain, for example public"),
				},
			},
			"gateway_class_name": schema.StringAttribute{
				Required: true,
				Description: "The GatewayClass of the gateway. It must be served by varnishgw (controllerName " + gwruntime.ControllerName +
					"); its parameters (image and pull policy, storage, varnishd parameters, VCL, log level) apply to the gateway, " +
					"overridden by infrastructure.parameters_ref.",
				Validators: []validator.String{stringvalidator.RegexMatches(dnsSubdomain, "must be a GatewayClass name (a DNS subdomain)")},
			},
			"default_scope": schema.StringAttribute{
				Optional: true,
				Description: notSupported("a varnishgw Gateway is not a default Gateway; routes name it in their parent_ref " +
					"blocks. Setting it is an error."),
			},
			"vcl": schema.StringAttribute{
				Optional: true,
				Description: "VCL of this gateway, added after the ghost preamble and the class VCL in main.vcl. Changes are " +
					"hot-reloaded by the running pods without a restart; VCL that does not compile leaves the running VCL in place.",
			},
			"mode": schema.StringAttribute{
				Optional: true,
				Computed: true,
				Default:  stringdefault.StaticString(gwruntime.ModeSupervise),
				Description: "How the pods run varnishd: supervise (the default), the chaperone container runs varnishd as its child; " +
					"or sidecar, a varnish container runs varnishd and the chaperone container steers it, sharing the work dir and " +
					"an admin secret (a Secret " + "the provider creates); its preStop hook runs `chaperone drain`, which drains varnishd through " +
					"the chaperone's drain socket, a Unix socket of mode 0600 on the volume the two containers share.",
				Validators: []validator.String{stringvalidator.OneOf(gwruntime.ModeSupervise, gwruntime.ModeSidecar)},
			},
			"replicas": schema.Int64Attribute{
				Optional:    true,
				Computed:    true,
				Default:     int64default.StaticInt64(1),
				Description: "The number of gateway pods.",
				Validators:  []validator.Int64{int64validator.Between(0, 1000)},
			},
			"drain_timeout_seconds": schema.Int64Attribute{
				Optional:    true,
				Computed:    true,
				Default:     int64default.StaticInt64(300),
				Description: "How long a stopping pod waits for client sessions to close (the chaperone's --drain-timeout). The pod's terminationGracePeriodSeconds is this plus 35 seconds.",
				Validators:  []validator.Int64{int64validator.Between(0, 86400)},
			},
			"service_type": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString(string(corev1.ServiceTypeClusterIP)),
				Description: "The type of the gateway's Service: ClusterIP (the default), NodePort or LoadBalancer.",
				Validators:  []validator.String{stringvalidator.OneOf("ClusterIP", "NodePort", "LoadBalancer")},
			},
			"external_traffic_policy": schema.StringAttribute{
				Optional: true,
				Description: "The Service's externalTrafficPolicy, with service_type NodePort or LoadBalancer: Local keeps the " +
					"traffic on the node that received it, so the gateway sees the client's own address (in the access log and " +
					"X-Forwarded-For) instead of a node's, and nodes without a gateway pod fail the load balancer's health check; " +
					"Cluster spreads it over every node. Kubernetes' default (Cluster) when unset.",
				Validators: []validator.String{stringvalidator.OneOf("Cluster", "Local")},
			},
			"escaped_slashes": schema.StringAttribute{
				Optional: true,
				Description: "What an escaped slash or backslash (%2F, %5C) in a request path does: reject answers 400, keep " +
					"passes it on escaped, never as a path separator. reject when unset. Either way the gateway normalises every " +
					"path before matching and forwarding (dot-segments removed, // merged, unreserved escapes decoded).",
				Validators: []validator.String{stringvalidator.OneOf(routing.EscapedSlashesReject, routing.EscapedSlashesKeep)},
			},
			"http2": schema.BoolAttribute{
				Optional: true,
				Description: "Whether the HTTPS listeners offer HTTP/2 (ALPN h2, then http/1.1) and varnishd serves it; " +
					"true when unset. Changing it rolls the pods. It has no effect on HTTP listeners.",
			},
			"proxy_protocol": schema.BoolAttribute{
				Optional: true,
				Description: "Whether every listener takes the PROXY protocol (v1 or v2) from a load balancer in front of the " +
					"gateway, so that the gateway sees the client's own address (in the access log and X-Forwarded-For); " +
					"false when unset, and when true a connection without a PROXY header is refused. " +
					"proxy_protocol_sources, the load balancer's addresses, is required with it. On HTTPS listeners the " +
					"TLS server name then does not reach the router, which routes by the Host header alone (see the HTTPS " +
					"guide); changing it rolls the pods.",
			},
			"proxy_protocol_sources":     proxySourcesAttribute(),
			"invalidation_endpoint_port": invalidationPortAttribute(),
			"sysctls": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Namespaced kernel parameters of the gateway pods (their securityContext.sysctls, after the " +
					"provider's own net.ipv4.ip_unprivileged_port_start, which cannot be set here), for example { " +
					"\"net.ipv4.tcp_migrate_req\" = \"1\" }, with which a certificate renewal on an HTTPS listener resets no " +
					"connection waiting to be accepted. A sysctl outside the kubelet's safe set must be allowed on the " +
					"nodes (the kubelet's allowedUnsafeSysctls), or the pods fail with SysctlForbidden, and Pod Security " +
					"baseline and restricted admit only the safe set. Changing it rolls the pods.",
				Validators: sysctlsValidators(),
			},
			"service_annotations": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Annotations of the gateway's Service, for example for a cloud load balancer.",
			},
			"pdb_max_unavailable": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString("1"),
				Description: "The PodDisruptionBudget's maxUnavailable: a number of pods such as 1 (the default) or a percentage such as 25%.",
				Validators:  []validator.String{stringvalidator.RegexMatches(intOrPercent, "must be a whole number such as 1 or a percentage such as 25%")},
			},
			"wait_for_rollout": schema.BoolAttribute{
				Optional:    true,
				Computed:    true,
				Default:     booldefault.StaticBool(true),
				Description: "Whether create and update wait until the Deployment has rolled out (all replicas updated and available).",
			},
			"rollout_timeout": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString("10m"),
				Description: "How long to wait for the rollout, a Go duration such as 10m.",
				Validators:  []validator.String{durationValidator{}},
			},
			"addresses": schema.ListAttribute{
				Computed:    true,
				ElementType: types.StringType,
				Description: "The gateway's addresses: the Service's load balancer IPs or hostnames, or else its cluster IP.",
			},
			"conditions": schema.ListAttribute{
				Computed:    true,
				ElementType: conditionType,
				Description: "The Gateway's status conditions (type, status, reason, message): Accepted from the provider, Programmed from the gateway pods.",
			},
			"listener_attached_routes": schema.MapAttribute{
				Computed:    true,
				ElementType: types.Int64Type,
				Description: "The number of accepted routes attached to each listener, by listener name, counted from the routes' routing fragments.",
			},
			"main_vcl_sha256": schema.StringAttribute{
				Computed: true,
				Description: "The SHA-256 of the rendered main.vcl (ghost preamble, class VCL, gateway VCL) in the VCL ConfigMap. " +
					"When the class's VCL has changed, the gateway's plan shows an update.",
			},
			"start_hash": schema.StringAttribute{
				Computed: true,
				Description: "The hash of what the pods are started with (the pod template annotation " + gwruntime.StartHashAnnotation +
					"); when it changes the pods are rolled. When the class's image, pull policy, storage, parameters or log " +
					"level, or the ConfigMap of infrastructure.parameters_ref, have changed, the gateway's plan shows an update.",
			},
		},
		Blocks: map[string]schema.Block{
			"listener": schema.ListNestedBlock{
				Description: "A listener: where the gateway accepts HTTP or HTTPS requests; at least one, at most 64. Listeners on " +
					"the same port share one varnishd socket and one Service port, and must have the same protocol.",
				Validators: []validator.List{listvalidator.IsRequired(), listvalidator.SizeBetween(1, 64)},
				NestedObject: schema.NestedBlockObject{
					Attributes: map[string]schema.Attribute{
						"name": schema.StringAttribute{
							Required:    true,
							Description: "The listener name, a DNS label unique in the gateway; routes select it with section_name.",
						},
						"port": schema.Int64Attribute{
							Required:    true,
							Description: "The port the listener accepts connections on, from 1 to 65535.",
						},
						"protocol": schema.StringAttribute{
							Optional:    true,
							Computed:    true,
							Default:     stringdefault.StaticString("HTTP"),
							Description: "The protocol: HTTP (the default), or HTTPS, which terminates TLS in the gateway pod (hitch, in front of varnishd) with the certificates of the tls block.",
						},
						"hostname": schema.StringAttribute{
							Optional: true,
							Description: "The hostname the listener serves, such as www.example.com or *.example.com; every hostname when unset. " +
								"On an HTTPS listener it is also the name clients ask for in TLS (SNI); its certificates should cover it.",
						},
					},
					Blocks: map[string]schema.Block{
						"allowed_routes": allowedRoutesBlock("Gateway"),
						"tls":            listenerTLSBlock("Gateway"),
					},
				},
			},
			"address": schema.ListNestedBlock{
				Description: notSupported("the gateway's addresses are those of its Service (see service_type and " +
					"service_annotations, and the computed addresses). Setting it is an error."),
				NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
					"type":  schema.StringAttribute{Optional: true, Description: "Not supported yet: IPAddress, Hostname or NamedAddress."},
					"value": schema.StringAttribute{Optional: true, Description: "Not supported yet: the address."},
				}},
			},
			"allowed_listeners": schema.SingleNestedBlock{
				Description: "Which ListenerSets (varnishgw_listener_set) may add listeners to the gateway, by their namespace; none when the block is absent. " +
					"An admitted ListenerSet's HTTP listeners are served on the gateway's pods: a new port becomes a port of the gateway's Service and a listen address of varnishd (the pods roll). " +
					"The gateway's own listeners win a conflict (the same port with another protocol, or the same port and hostname), then older ListenerSets.",
				Attributes: map[string]schema.Attribute{
					"namespaces": schema.StringAttribute{
						Optional: true,
						Description: "None (the default: no ListenerSet), Same (ListenerSets in the gateway's namespace), All (in every namespace), " +
							"or Selector (in the namespaces whose labels match selector).",
						Validators: []validator.String{stringvalidator.OneOf("None", "Same", "All", "Selector")},
					},
					"selector": schema.MapAttribute{
						Optional: true, ElementType: types.StringType,
						Description: "The labels the namespace of a ListenerSet must have, with namespaces = \"Selector\" (matchLabels).",
						Validators:  []validator.Map{mapvalidator.SizeAtLeast(1)},
					},
				},
			},
			"tls": schema.SingleNestedBlock{
				Description: notSupported("the gateway's TLS to backends (Varnish Cache has no TLS to backends, so " +
					"BackendTLSPolicy is not served either) and client certificate validation on the listeners. HTTPS " +
					"listeners take their certificates from the listener's tls block. Setting it is an error."),
				Blocks: map[string]schema.Block{
					"backend": schema.SingleNestedBlock{
						Description: "Not supported yet: TLS to backends.",
						Blocks: map[string]schema.Block{
							"client_certificate_ref": schema.SingleNestedBlock{
								Description: "Not supported yet: the client certificate the gateway presents to backends.",
								Attributes: map[string]schema.Attribute{
									"group":     schema.StringAttribute{Optional: true, Description: "Not supported yet: the referent's API group."},
									"kind":      schema.StringAttribute{Optional: true, Description: "Not supported yet: the referent's kind."},
									"name":      schema.StringAttribute{Optional: true, Description: "Not supported yet: the referent's name."},
									"namespace": schema.StringAttribute{Optional: true, Description: "Not supported yet: the referent's namespace."},
								},
							},
						},
					},
					"frontend": schema.SingleNestedBlock{
						Description: "Not supported yet: TLS settings of the listeners.",
						Blocks: map[string]schema.Block{
							"default": schema.SingleNestedBlock{
								Description: "Not supported yet: the settings of every port.",
								Blocks:      map[string]schema.Block{"validation": frontendValidationBlock()},
							},
							"per_port": schema.ListNestedBlock{
								Description: "Not supported yet: the settings of one port.",
								NestedObject: schema.NestedBlockObject{
									Attributes: map[string]schema.Attribute{
										"port": schema.Int64Attribute{Optional: true, Description: "Not supported yet: the port."},
									},
									Blocks: map[string]schema.Block{
										"tls": schema.SingleNestedBlock{
											Description: "Not supported yet: the port's settings.",
											Blocks:      map[string]schema.Block{"validation": frontendValidationBlock()},
										},
									},
								},
							},
						},
					},
				},
			},
			"resources": schema.SingleNestedBlock{
				Description: "Compute resources of the gateway container, as Kubernetes quantities.",
				Attributes: map[string]schema.Attribute{
					"requests": schema.MapAttribute{
						Optional:    true,
						ElementType: types.StringType,
						Description: "Requested resources, for example { cpu = \"500m\", memory = \"512Mi\" }.",
					},
					"limits": schema.MapAttribute{
						Optional:    true,
						ElementType: types.StringType,
						Description: "Resource limits, for example { memory = \"1Gi\" }. Leave room above the storage size for varnishd's overhead.",
					},
				},
			},
			"pod":            podSchema(),
			"infrastructure": infrastructureSchema(),
			"cache":          cacheBlock(false),
		},
	}
}

// allowedRoutesBlock is the allowed_routes block of a listener of a
// Gateway or a ListenerSet (owner): which routes may attach to it.
func allowedRoutesBlock(owner string) schema.SingleNestedBlock {
	return schema.SingleNestedBlock{
		Description: "Which routes may attach to the listener; those of the " + owner + "'s own namespace when unset.",
		Attributes: map[string]schema.Attribute{
			"namespaces": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString("Same"),
				Description: "Same (the " + owner + "'s namespace, the default), All, or Selector (namespaces whose labels match selector and selector_expression).",
				Validators:  []validator.String{stringvalidator.OneOf("Same", "All", "Selector")},
			},
			"selector": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "The labels a route's namespace must have, with namespaces = \"Selector\" (matchLabels).",
			},
		},
		Blocks: map[string]schema.Block{
			"selector_expression": schema.ListNestedBlock{
				Description: "A condition on the labels of a route's namespace, with namespaces = \"Selector\" (matchExpressions); all of them must hold.",
				NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
					"key": schema.StringAttribute{Required: true, Description: "The label key."},
					"operator": schema.StringAttribute{
						Required:    true,
						Description: "In, NotIn, Exists or DoesNotExist.",
						Validators:  []validator.String{stringvalidator.OneOf("In", "NotIn", "Exists", "DoesNotExist")},
					},
					"values": schema.ListAttribute{
						Optional:    true,
						ElementType: types.StringType,
						Description: "The label values, with In and NotIn.",
					},
				}},
			},
			"kind": schema.ListNestedBlock{
				Description: "A kind of route allowed; the routes the protocol allows (HTTPRoute) when unset. varnishgw serves HTTPRoute only.",
				NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
					"group": schema.StringAttribute{Optional: true, Description: "The route's API group; gateway.networking.k8s.io when unset."},
					"kind":  schema.StringAttribute{Required: true, Description: "The route's kind: HTTPRoute."},
				}},
			},
		},
	}
}
