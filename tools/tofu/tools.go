//go:build tools

// Package tools pins the OpenTofu CLI used when terraform and tofu are missing.
package tools

import _ "github.com/opentofu/opentofu/cmd/tofu"
