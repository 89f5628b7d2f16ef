//go:build race

package conformance

// raceBuild builds the chaperone binary under test with -race when the
// tests run with -race: a data race makes it exit with status 66.
const raceBuild = true
