// Package nodetest tests the test node of package testenv as its users
// use it (testenv.Main(m, testenv.WithNode()), testenv.GetNode): a
// Deployment of a real image becomes Ready, answers on its pod IPs and its
// Service's ClusterIP, scales and goes away with its namespace; images come
// from an archive or from a registry on loopback; and a node leaves the
// machine as it was when it stops, when its test binary panics, is
// interrupted or killed, and after a sweep.
package nodetest
