//go:build tools

// Package tools pins kube-apiserver for the local test control plane.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
