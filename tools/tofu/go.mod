module github.com/varnishgw/terraform-provider-varnishgw/tools/tofu

// This module only builds the OpenTofu CLI, for machines that have neither
// terraform nor tofu on PATH. The replace repeats the one in OpenTofu's go.mod.

go 1.26

require github.com/opentofu/opentofu v1.10.10

replace github.com/hashicorp/hcl/v2 v2.20.1 => github.com/opentofu/hcl/v2 v2.20.2-0.20251021132045-587d123c2828
