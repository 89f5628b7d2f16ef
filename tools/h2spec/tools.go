//go:build tools

// Package tools pins h2spec, the HTTP/2 conformance suite the HTTPS listener
// test runs (internal/mainvcl/h2spec_test.go; scripts/setup.sh builds it).
package tools

import _ "github.com/summerwind/h2spec/cmd/h2spec"
