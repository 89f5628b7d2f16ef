package provider

import "encoding/json"

// This file holds the helpers the provider's tests share.

// mustJSON is v encoded as JSON, for messages and comparisons.
func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
