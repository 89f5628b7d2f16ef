module github.com/varnishgw/terraform-provider-varnishgw/tools/h2spec

// This module only builds h2spec for the HTTP/2 conformance test of HTTPS
// listeners. h2spec v2.2.1 has no go.mod (+incompatible): its dependencies
// resolve here, at the versions go mod tidy picks.

go 1.26.0

require github.com/summerwind/h2spec v2.2.1+incompatible

require (
	github.com/fatih/color v1.19.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
