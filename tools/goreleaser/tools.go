//go:build tools

// Package tools pins GoReleaser, which make release-check runs (scripts/setup.sh builds it).
package tools

import _ "github.com/goreleaser/goreleaser/v2"
