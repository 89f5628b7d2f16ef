package provider

import (
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// sessionPersistenceBlock is a rule's session_persistence block, the
// Gateway API HTTPRouteRule.SessionPersistence (experimental channel). Its
// values are checked by routing.ValidateHTTPRoute, whose errors
// ValidateConfig reports at the attribute with the value and the fix (as
// for the rule's other Gateway API fields), so they have no validators of
// their own that would report the same problem twice.
func sessionPersistenceBlock() schema.SingleNestedBlock {
	return schema.SingleNestedBlock{
		Description: "Keeps each client on the backend endpoint its first request was sent to, with a cookie the gateway " +
			"sets (or, with type Header, a header it sends and the client sends back), while that endpoint is " +
			"still one of the rule's backends (any weight, 0 included) and healthy; the cookie's Path is the " +
			"rule's path match. Other requests are sent by weight and start a new session. The field exists only " +
			"in the Gateway API experimental channel's HTTPRoute CRD (see the session persistence guide).",
		Attributes: map[string]schema.Attribute{
			"session_name": schema.StringAttribute{
				Optional: true,
				Description: "The cookie name (the header name with type Header), at most 128 letters, digits and " +
					"!#$%&'*+-.^_`|~. When unset, each rule gets its own name, vgw-session- followed by 16 hexadecimal " +
					"digits derived from the route and rule. Choose a name your application does not use: the gateway " +
					"removes the cookie (or header) from the requests it forwards.",
			},
			"absolute_timeout": schema.StringAttribute{
				Optional: true,
				Description: "How long a session lasts from its first request, as a Gateway API duration of whole " +
					"seconds such as 30m or 12h; sessions do not expire when unset. The gateway checks it with the " +
					"time the cookie carries, and a permanent cookie also gets it as Max-Age.",
			},
			"type": schema.StringAttribute{
				Optional: true,
				Computed: true,
				Default:  stringdefault.StaticString(string(gatewayv1.CookieBasedSessionPersistence)),
				Description: "Cookie (the default): the gateway sets a cookie, which browsers send back. Header: the " +
					"gateway answers a new session with a response header named session_name, which the client must " +
					"send back as a request header; for API clients that do not keep cookies. cookie_config is for " +
					"Cookie only.",
			},
		},
		Blocks: map[string]schema.Block{
			"cookie_config": schema.SingleNestedBlock{
				Description: "The session cookie's settings.",
				Attributes: map[string]schema.Attribute{
					"lifetime_type": schema.StringAttribute{
						Optional: true,
						Computed: true,
						Default:  stringdefault.StaticString(string(gatewayv1.SessionCookieLifetimeType)),
						Description: "Session (the default), a cookie the browser drops when it closes, or Permanent, a " +
							"cookie with Max-Age set to absolute_timeout, which it then requires.",
					},
				},
			},
		},
	}
}
