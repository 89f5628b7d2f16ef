package invalidation

// Path is the invalidation endpoint's path; it takes POST with a JSON
// vgwapi.InvalidationSpec as the body.
const Path = "/invalidate"

// Audience is the audience a caller's token must be issued for
// (kubectl create token NAME --audience=varnishgw-invalidate): a token
// sent to the endpoint is then worthless against the API server.
const Audience = "varnishgw-invalidate"

// RequestedByAnnotation names, on a CacheInvalidation the endpoint
// created, the user who asked for it.
const RequestedByAnnotation = "varnishgw.dev/requested-by"

// Response is the endpoint's JSON answer.
type Response struct {
	// Name and UID are the CacheInvalidation's.
	Name string `json:"name"`
	UID  string `json:"uid"`
	// Applied lists the pods that acknowledged it, Pending those that had
	// not when the wait ended (answer 504).
	Applied []string `json:"applied"`
	Pending []string `json:"pending,omitempty"`
	// Error says what failed, with the answer's status.
	Error string `json:"error,omitempty"`
}
