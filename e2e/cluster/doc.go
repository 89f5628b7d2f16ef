// Package cluster holds the end-to-end tests on a real single-node cluster
// (package testenv's node: kubelet, containerd, kube-proxy and the
// controllers): the provider applies a class, a gateway and routes with the
// real terraform and tofu CLIs, and the gateway runs as real pods of the
// image `make image` built, in front of echo backend pods behind real
// Services, so EndpointSlices come from Kubernetes' own controller.
package cluster
