package provider

import (
	"context"
	"fmt"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// portValidators check a port number. The routing core checks backend
// and redirect ports itself; these are for the ports it does not check.
var portValidators = []validator.Int64{int64validator.Between(1, 65535)}

// requires is the validator of a single block whose arguments names must
// be set when the block is. (An argument of a single block cannot be
// Required: the framework checks it even when the block is absent.)
func requires(names ...string) []validator.Object {
	var exprs []path.Expression
	for _, n := range names {
		exprs = append(exprs, path.MatchRelative().AtName(n))
	}
	return []validator.Object{objectvalidator.AlsoRequires(exprs...)}
}

// notSupported is the description of a field the provider rejects.
func notSupported(why string) string { return "Not supported yet: " + why }

func headerBlock(desc string) schema.ListNestedBlock {
	return schema.ListNestedBlock{
		Description: desc,
		NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
			"name":  schema.StringAttribute{Required: true, Description: "The header name, case-insensitive."},
			"value": schema.StringAttribute{Required: true, Description: "The header value."},
		}},
	}
}

func headerModifierBlock(desc string) schema.SingleNestedBlock {
	return schema.SingleNestedBlock{
		Description: desc,
		Attributes: map[string]schema.Attribute{
			"remove": schema.ListAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Names of headers to remove.",
			},
		},
		Blocks: map[string]schema.Block{
			"set": headerBlock("A header to set, replacing any value the message has; one block per header."),
			"add": headerBlock("A header to add, appending to any value the message has; one block per header."),
		},
	}
}

func pathModifierBlock(desc string) schema.SingleNestedBlock {
	return schema.SingleNestedBlock{
		Description: desc,
		Attributes: map[string]schema.Attribute{
			"type": schema.StringAttribute{
				Optional:    true,
				Description: "ReplaceFullPath or ReplacePrefixMatch; required in the block.",
			},
			"replace_full_path": schema.StringAttribute{
				Optional:    true,
				Description: "The path that replaces the whole request path, with type ReplaceFullPath.",
			},
			"replace_prefix_match": schema.StringAttribute{
				Optional: true,
				Description: "The prefix that replaces the matched PathPrefix, with type ReplacePrefixMatch. The rule " +
					"must then have only PathPrefix matches.",
			},
		},
		Validators: requires("type"),
	}
}

func valueMatchBlock(desc, what string) schema.ListNestedBlock {
	return schema.ListNestedBlock{
		Description: desc,
		NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
			"type": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString("Exact"),
				Description: "Exact (the default) or RegularExpression.",
			},
			"name":  schema.StringAttribute{Required: true, Description: "The " + what + " name."},
			"value": schema.StringAttribute{Required: true, Description: "The value, or the regular expression, to match."},
		}},
	}
}

// objectRefAttributes are the attributes of a Gateway API
// BackendObjectReference: a Service unless group and kind say otherwise.
// In a single block, name is optional in the schema and required by the
// block's validator (requires).
func objectRefAttributes(single bool, portDesc string) map[string]schema.Attribute {
	name := schema.StringAttribute{Required: true, Description: "The name of the Service (or of the object of kind)."}
	if single {
		name = schema.StringAttribute{Optional: true, Description: "The name of the Service (or of the object of kind); required in the block."}
	}
	return map[string]schema.Attribute{
		"name":      name,
		"namespace": schema.StringAttribute{Optional: true, Description: "The namespace of the Service; the route's when unset. Another namespace needs a ReferenceGrant there."},
		"port":      schema.Int64Attribute{Optional: true, Description: portDesc},
		"group": schema.StringAttribute{
			Optional:    true,
			Description: "The API group of the referent: \"\" (the core API group, the default) for a Service.",
		},
		"kind": schema.StringAttribute{
			Optional: true,
			Description: "The kind of the referent: Service (the default). varnishgw routes to Services only: a reference " +
				"of another kind gets no traffic (its share of requests is answered with status 500) and the route's " +
				"ResolvedRefs condition is False with reason InvalidKind.",
		},
	}
}

func stringList(desc string) schema.ListAttribute {
	return schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: desc}
}

// corsBlock is the schema of a CORS filter (the Gateway API
// HTTPCORSFilter). The routing core checks the lists at plan time (origin
// form, methods, header names, "*" alone, duplicates, lengths) with
// errors that name the fix, so they have no validators of their own that
// would repeat its errors; max_age, which the core takes as is, has one.
func corsBlock() schema.SingleNestedBlock {
	return schema.SingleNestedBlock{
		Description: "Cross-origin resource sharing, with type CORS: the gateway answers preflight requests (OPTIONS with Origin " +
			"and Access-Control-Request-Method) itself with 204, never sending them to the backend, and adds the " +
			"Access-Control-Allow-Origin (the request's origin), Access-Control-Allow-Credentials and " +
			"Access-Control-Expose-Headers headers to the responses of requests from an allowed origin. On a rule with " +
			"this filter the gateway owns the Access-Control-* response headers: those of the backend are removed, and " +
			"responses say Vary: Origin. A request from an origin that is not allowed is served without CORS headers, so " +
			"the browser refuses it.",
		Attributes: map[string]schema.Attribute{
			"allow_origins": schema.ListAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "The origins allowed (at most 64), each scheme://host[:port] with scheme http or https, where a " +
					"missing port means 80 for http and 443 for https. The host may start with \"*.\" for one or more " +
					"labels (\"https://*.example.com\" allows https://a.b.example.com, not https://example.com) or be \"*\" " +
					"for any host with that scheme and port, and \"*\" alone allows every origin. Without origins no " +
					"request is allowed.",
			},
			"allow_methods": schema.ListAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "The methods a preflight allows (Access-Control-Allow-Methods): GET, HEAD, POST, PUT, DELETE, " +
					"CONNECT, OPTIONS, TRACE or PATCH, in upper case, or \"*\" alone, which allows the method the " +
					"preflight asks for. Browsers allow GET, HEAD and POST without it.",
			},
			"allow_headers": schema.ListAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "The request headers a preflight allows (Access-Control-Allow-Headers), or \"*\" alone, " +
					"which allows the headers the preflight asks for. Header names are case-insensitive; the gateway sends " +
					"them in lower case. At most 64.",
			},
			"expose_headers": schema.ListAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "The response headers scripts may read besides the CORS-safelisted ones " +
					"(Access-Control-Expose-Headers), or \"*\" alone for all of them, which requires allow_credentials " +
					"false. Header names are case-insensitive; the gateway sends them in lower case. At most 64.",
			},
			"allow_credentials": schema.BoolAttribute{
				Optional: true,
				Description: "Whether requests with credentials (cookies, HTTP authentication) are allowed: the gateway then " +
					"sends Access-Control-Allow-Credentials: true. Unset or false, the header is left out.",
			},
			"max_age": schema.Int64Attribute{
				Optional:    true,
				Computed:    true,
				Default:     int64default.StaticInt64(5),
				Description: "How long, in seconds, a browser may cache a preflight's answer (Access-Control-Max-Age); 5 when unset.",
				Validators:  []validator.Int64{int64validator.Between(1, 2147483647)},
			},
		},
	}
}

// filterBlock is the schema of an HTTPRouteFilter, in a rule or in a
// backend_ref (where routing.ValidateHTTPRoute accepts
// RequestHeaderModifier only).
func filterBlock(desc string, onBackend bool) schema.ListNestedBlock {
	b := schema.ListNestedBlock{
		Description: desc,
		NestedObject: schema.NestedBlockObject{
			Attributes: map[string]schema.Attribute{
				"type": schema.StringAttribute{
					Required: true,
					Description: "RequestHeaderModifier, ResponseHeaderModifier, RequestRedirect, URLRewrite, RequestMirror or CORS; " +
						"set the block of the same name. ExternalAuth and ExtensionRef are not supported yet.",
				},
			},
			Blocks: map[string]schema.Block{
				"request_header_modifier":  headerModifierBlock("Changes to the request headers, with type RequestHeaderModifier."),
				"response_header_modifier": headerModifierBlock("Changes to the response headers, with type ResponseHeaderModifier."),
				"request_redirect": schema.SingleNestedBlock{
					Description: "A redirect response, with type RequestRedirect. A rule with a redirect has no backend_ref.",
					Attributes: map[string]schema.Attribute{
						"scheme":      schema.StringAttribute{Optional: true, Description: "The scheme of the location, http or https."},
						"hostname":    schema.StringAttribute{Optional: true, Description: "The hostname of the location."},
						"port":        schema.Int64Attribute{Optional: true, Description: "The port of the location, from 1 to 65535."},
						"status_code": schema.Int64Attribute{Optional: true, Description: "The status code: 301, 302 (the default), 303, 307 or 308."},
					},
					Blocks: map[string]schema.Block{
						"path": pathModifierBlock("How the location's path is built from the request path."),
					},
				},
				"url_rewrite": schema.SingleNestedBlock{
					Description: "A rewrite of the request sent to the backend, with type URLRewrite.",
					Attributes: map[string]schema.Attribute{
						"hostname": schema.StringAttribute{Optional: true, Description: "The Host header sent to the backend."},
					},
					Blocks: map[string]schema.Block{
						"path": pathModifierBlock("How the path sent to the backend is built from the request path."),
					},
				},
				"request_mirror": schema.SingleNestedBlock{
					Description: "A copy of the requests sent to another Service, with type RequestMirror; its responses are ignored.",
					Validators:  requires("backend_ref"),
					Attributes: map[string]schema.Attribute{
						"percent": schema.Int64Attribute{
							Optional:    true,
							Description: "The percentage of requests mirrored, from 0 to 100; all when unset (and without fraction).",
						},
					},
					Blocks: map[string]schema.Block{
						"backend_ref": schema.SingleNestedBlock{
							Description: "The Service that receives the copies; required in request_mirror.",
							Attributes:  objectRefAttributes(true, "The Service port, from 1 to 65535; required for a Service."),
							Validators:  requires("name"),
						},
						"fraction": schema.SingleNestedBlock{
							Description: "The share of requests mirrored as numerator/denominator, instead of percent. varnishgw " +
								"mirrors in steps of 1%: the fraction must be a whole percentage, such as 1/4.",
							Attributes: map[string]schema.Attribute{
								"numerator":   schema.Int64Attribute{Optional: true, Description: "The numerator; required in the block."},
								"denominator": schema.Int64Attribute{Optional: true, Description: "The denominator; 100 when unset."},
							},
							Validators: requires("numerator"),
						},
					},
				},
				"cors": corsBlock(),
				"external_auth": schema.SingleNestedBlock{
					Description: notSupported("authenticate requests in the backend. Setting it is an error."),
					Attributes: map[string]schema.Attribute{
						"protocol": schema.StringAttribute{Optional: true, Description: "Not supported yet: GRPC or HTTP."},
					},
					Blocks: map[string]schema.Block{
						"backend_ref": schema.SingleNestedBlock{
							Description: "Not supported yet: the authentication service.",
							Attributes: map[string]schema.Attribute{
								"name":      schema.StringAttribute{Optional: true, Description: "Not supported yet: the name of the service."},
								"namespace": schema.StringAttribute{Optional: true, Description: "Not supported yet: the namespace of the service."},
								"port":      schema.Int64Attribute{Optional: true, Description: "Not supported yet: the port of the service."},
								"group":     schema.StringAttribute{Optional: true, Description: "Not supported yet: the API group of the service."},
								"kind":      schema.StringAttribute{Optional: true, Description: "Not supported yet: the kind of the service."},
							},
						},
						"grpc": schema.SingleNestedBlock{
							Description: "Not supported yet: settings of a GRPC authentication service.",
							Attributes:  map[string]schema.Attribute{"allowed_headers": stringList("Not supported yet: request headers sent to the service.")},
						},
						"http": schema.SingleNestedBlock{
							Description: "Not supported yet: settings of an HTTP authentication service.",
							Attributes: map[string]schema.Attribute{
								"path":                     schema.StringAttribute{Optional: true, Description: "Not supported yet: the path prefix of requests to the service."},
								"allowed_headers":          stringList("Not supported yet: request headers sent to the service."),
								"allowed_response_headers": stringList("Not supported yet: response headers of the service sent to the backend."),
							},
						},
						"forward_body": schema.SingleNestedBlock{
							Description: "Not supported yet: whether the request body goes to the service.",
							Attributes:  map[string]schema.Attribute{"max_size": schema.Int64Attribute{Optional: true, Description: "Not supported yet: the largest body sent, in bytes."}},
						},
					},
				},
				"extension_ref": schema.SingleNestedBlock{
					Description: notSupported("varnishgw has no filter extensions; custom request handling goes in the gateway's or the class's vcl. Setting it is an error."),
					Attributes: map[string]schema.Attribute{
						"group": schema.StringAttribute{Optional: true, Description: "Not supported yet: the extension's API group."},
						"kind":  schema.StringAttribute{Optional: true, Description: "Not supported yet: the extension's kind."},
						"name":  schema.StringAttribute{Optional: true, Description: "Not supported yet: the extension's name."},
					},
				},
			},
		},
	}
	if !onBackend {
		return b
	}
	// On a backend_ref only RequestHeaderModifier is applied (ghost
	// applies it when that backend is picked); the other types are
	// rejected by routing.ValidateHTTPRoute at plan time.
	b.NestedObject.Attributes["type"] = schema.StringAttribute{
		Required: true,
		Description: "RequestHeaderModifier, with the request_header_modifier block. The other filter types are not supported " +
			"on a backend_ref: setting one is an error.",
	}
	for _, k := range []string{"response_header_modifier", "request_redirect", "url_rewrite", "request_mirror", "cors"} {
		sb := b.NestedObject.Blocks[k].(schema.SingleNestedBlock)
		sb.Description = notSupported("on a backend_ref; put this filter in the rule, whose filters apply to all of its " +
			"backends, or give the backend a rule of its own. Setting it is an error.")
		b.NestedObject.Blocks[k] = sb
	}
	return b
}

func (r *httpRouteResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A Gateway API HTTPRoute attached to varnishgw Gateways, whose arguments and blocks mirror the " +
			"HTTPRoute spec in snake_case (a repeated field is a block with the singular name: parent_ref, rule, " +
			"match, filter, backend_ref). The provider validates the route at plan time as the gateways will " +
			"apply it, writes the HTTPRoute with its status and what it contributes to each Gateway (a " +
			"RoutingFragment, which the gateway pods load), and by default waits until the pods serve it. The " +
			"computed routing attribute shows that contribution and the conditions in the plan; the security " +
			"guide lists the RBAC it writes and the architecture guide who writes which condition.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "The route's namespace/name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"namespace": schema.StringAttribute{
				Required:      true,
				Description:   "The namespace of the HTTPRoute. It must exist. Changing it replaces the route.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:    []validator.String{stringvalidator.RegexMatches(dnsLabel, "must be a namespace name (a DNS label)")},
			},
			"name": schema.StringAttribute{
				Required:      true,
				Description:   "The name of the HTTPRoute, a DNS subdomain. Changing it replaces the route.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators: []validator.String{
					stringvalidator.LengthBetween(1, 253),
					stringvalidator.RegexMatches(dnsSubdomain, "must be a lower-case DNS subdomain, for example web"),
				},
			},
			"hostnames": schema.ListAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Hostnames the route serves, such as www.example.com or *.example.com. They are intersected with the listeners' hostnames; unset means the listeners' hostnames.",
			},
			"use_default_gateways": schema.StringAttribute{
				Optional: true,
				Description: notSupported("varnishgw Gateways are not default Gateways (the Gateway's defaultScope); name the " +
					"Gateways in parent_ref blocks. Setting it is an error."),
			},
			"wait_for_served": schema.BoolAttribute{
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(true),
				Description: "Whether create, update and destroy wait until every Ready pod of each parent Gateway reports " +
					"that it serves the route's new routing (its GatewayPodReport) and the pods have written the route's " +
					"ResolvedRefs condition for it. A pod that rejects the routing fails the " +
					"apply with the pod's reason and sets the route's Accepted condition to False. Gateways without Ready " +
					"pods are not waited for.",
			},
			"served_timeout": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString("1m"),
				Description: "How long to wait for the gateway pods to serve the routing, a Go duration such as 1m.",
				Validators:  []validator.String{durationValidator{}},
			},
			"routing": schema.StringAttribute{
				Computed: true,
				Description: "What the route contributes to each parent Gateway served by varnishgw, as deterministic JSON: " +
					"an array sorted by gateway (namespace/name) of objects with gateway, accepted, listeners (name, port, " +
					"intersected hostnames), rules (normalised as the gateways apply them: matches, filters, timeouts, retry, " +
					"backends with weights, the rule's own cache policy) and status (the conditions of each parent reference). Known at plan time.",
			},
			"effective_cache": effectiveCacheAttribute(),
		},
		Blocks: map[string]schema.Block{
			"parent_ref": schema.ListNestedBlock{
				Description: "A Gateway, or a ListenerSet of a Gateway, the route attaches to; at least one. Only Gateways whose GatewayClass has the " +
					"controllerName " + gwruntime.ControllerName + " (and their ListenerSets) get a status entry and a routing fragment from the provider.",
				Validators: []validator.List{listvalidator.IsRequired(), listvalidator.SizeAtLeast(1)},
				NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{Required: true, Description: "The name of the Gateway (or ListenerSet, with kind = \"ListenerSet\")."},
					"namespace": schema.StringAttribute{
						Optional:    true,
						Description: "The namespace of the Gateway (or ListenerSet); the route's namespace when unset.",
					},
					"section_name": schema.StringAttribute{
						Optional:    true,
						Description: "The name of the one listener to attach to; all listeners that allow the route when unset.",
					},
					"port": schema.Int64Attribute{
						Optional:    true,
						Description: "Attach only to listeners on this port.",
						Validators:  portValidators,
					},
					"group": schema.StringAttribute{
						Optional:    true,
						Description: "The API group of the parent: " + gatewayGroup + " (the default). Other groups are not supported yet.",
					},
					"kind": schema.StringAttribute{
						Optional:    true,
						Description: "The kind of the parent: Gateway (the default), or ListenerSet: the route then attaches to the listeners of that ListenerSet (varnishgw_listener_set) only, and section_name names one of them.",
					},
				}},
			},
			"rule": schema.ListNestedBlock{
				Description: "A routing rule; at most 16. A request is served by the most specific matching rule across the Gateway's routes (Gateway API precedence).",
				NestedObject: schema.NestedBlockObject{
					Attributes: map[string]schema.Attribute{
						"name": schema.StringAttribute{Optional: true, Description: "The rule name, a DNS label."},
					},
					Blocks: map[string]schema.Block{
						"match": schema.ListNestedBlock{
							Description: "A condition that selects the rule; any one of them does. Without match blocks the rule selects every request (PathPrefix /).",
							NestedObject: schema.NestedBlockObject{
								Attributes: map[string]schema.Attribute{
									"method": schema.StringAttribute{
										Optional:    true,
										Description: "The HTTP method to match, for example GET.",
									},
								},
								Blocks: map[string]schema.Block{
									"path": schema.SingleNestedBlock{
										Description: "The path match.",
										Attributes: map[string]schema.Attribute{
											"type": schema.StringAttribute{
												Optional:    true,
												Computed:    true,
												Default:     stringdefault.StaticString("PathPrefix"),
												Description: "PathPrefix (the default), Exact or RegularExpression.",
											},
											"value": schema.StringAttribute{Optional: true, Description: "The path, prefix or regular expression; required in the block."},
										},
										Validators: requires("value"),
									},
									"header":      valueMatchBlock("A header match; all of them must match.", "header"),
									"query_param": valueMatchBlock("A query parameter match; all of them must match.", "query parameter"),
								},
							},
						},
						"filter": filterBlock("A filter applied to the requests the rule selects, in order.", false),
						"backend_ref": schema.ListNestedBlock{
							Description: "A Service that serves the rule's requests; the requests are spread over them by weight.",
							NestedObject: schema.NestedBlockObject{
								Attributes: func() map[string]schema.Attribute {
									a := objectRefAttributes(false, "The Service port, from 1 to 65535; required for a Service.")
									a["weight"] = schema.Int64Attribute{
										Optional:    true,
										Computed:    true,
										Default:     int64default.StaticInt64(1),
										Description: "The relative share of requests this backend gets, from 0 to 1000000; 1 when unset, 0 sends it none.",
									}
									return a
								}(),
								Blocks: map[string]schema.Block{
									"filter": filterBlock("A filter applied only to the requests sent to this backend, after the rule's filters. "+
										"Only type RequestHeaderModifier is supported here; any other type is an error: put that filter in "+
										"the rule, whose filters apply to all of its backends, or give the backend a rule of its own.", true),
								},
							},
						},
						"timeouts": schema.SingleNestedBlock{
							Description: "Timeouts as Gateway API durations, for example 10s or 1m30s.",
							Attributes: map[string]schema.Attribute{
								"request":         schema.StringAttribute{Optional: true, Description: "The time to answer a request, retries included."},
								"backend_request": schema.StringAttribute{Optional: true, Description: "The time for one request to a backend."},
							},
						},
						"retry":               retryBlock(),
						"cache":               cacheBlock(true),
						"session_persistence": sessionPersistenceBlock(),
					},
				},
			},
		},
	}
}

// retryBlock is a rule's retry policy (Gateway API HTTPRouteRetry, an
// experimental channel field: checkExperimentalFields).
func retryBlock() schema.SingleNestedBlock {
	return schema.SingleNestedBlock{
		Description: "The rule's retry policy: a backend request that fails to connect, times out, or gets one of codes is " +
			"sent again, to a backend picked again by the rule's weights, after backoff, at most attempts times " +
			"(and at most varnishd's max_retries, 4 by default), and the client then gets the last answer. Only " +
			"requests without a body whose method is GET, HEAD, OPTIONS, TRACE, PUT or DELETE are retried, and a " +
			"rule with a retry cannot have backend_ref filters. The HTTPRoute field exists only in the Gateway " +
			"API experimental channel's CRDs: on a cluster with the standard channel's the plan fails.",
		Attributes: map[string]schema.Attribute{
			"codes": schema.ListAttribute{
				Optional:    true,
				ElementType: types.Int64Type,
				Description: "The backend response statuses that are retried, each from 400 to 599 and listed once, for example " +
					"[502, 503, 504]. Unset or empty: only failed connections and timeouts are retried.",
				Validators: []validator.List{
					listvalidator.ValueInt64sAre(int64validator.Between(400, 599)),
					listvalidator.UniqueValues(),
				},
			},
			"attempts": schema.Int64Attribute{
				Optional: true,
				Description: fmt.Sprintf("The number of retries after the first request, from 1 to %d; %d when unset.",
					ghostjson.MaxRetryAttempts, routing.DefaultRetryAttempts),
				Validators: []validator.Int64{int64validator.Between(1, ghostjson.MaxRetryAttempts)},
			},
			"backoff": schema.StringAttribute{
				Optional: true,
				Description: "The wait before each retry, a Gateway API duration such as 100ms or 1s, at most 2s: it holds one of " +
					"the gateway's worker threads. Unset: none. No retry starts that could not wait its backoff within the " +
					"rule's timeouts request, or 30s without one.",
			},
		},
	}
}
