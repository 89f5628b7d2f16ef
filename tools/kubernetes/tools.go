//go:build tools

// Package tools pins the Kubernetes binaries of the local test control plane
// and test node, and the kubectl that `make demo` tells users to run, all
// from one k8s.io/kubernetes release: scripts/setup.sh builds them with one
// `go build`.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
