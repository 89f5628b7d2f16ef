// Package e2e holds the end-to-end tests of varnishgw: the real terraform
// and tofu CLIs with this repository's provider, the local control plane
// (package testenv), and the chaperone binary running varnishd with the
// ghost VMOD as a gateway pod would (package demo), with real HTTP
// traffic. `make test` runs them.
package e2e
