// Package conformance holds the conformance replay (TestConformanceReplay):
// the HTTPRoute scenarios of the Gateway API conformance suite replayed
// through the chaperone binary, varnishd and ghost against the test API
// server (package testenv). It checks the features the provider claims in
// GatewayClass status (package internal/conformance) and renders the user
// guide's page of results, templates/guides/conformance.md.tmpl, from
// which make docs writes docs/guides/conformance.md. `make test` runs it;
// `make conformance-docs` rewrites the page.
package conformance
