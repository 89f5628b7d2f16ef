//go:build tools

// Package tools pins golangci-lint, which make lint runs (scripts/setup.sh builds it).
package tools

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
