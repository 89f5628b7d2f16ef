//go:build !race

package conformance

const raceBuild = false
