// Package testenv starts a real Kubernetes control plane for tests.
package testenv
