// Command terraform-provider-varnishgw is the varnishgw Terraform/OpenTofu
// provider: it declares Gateway API gateway classes, gateways and HTTP routes
// served by Varnish, and writes them and each gateway's runtime to Kubernetes.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime/debug"
	"runtime/pprof"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/version"
	"github.com/varnishgw/terraform-provider-varnishgw/provider"
)

// gcPercent is the provider's GOGC unless the environment sets one: a plan
// of many routes allocates much short-lived data in the framework's value
// conversions, and collecting at twice the live heap instead of once saves
// a sixth of the provider's CPU for some 50 MB more at 200 routes
// (docs/performance.md).
const gcPercent = 200

// tfLogVariables are the variables through which Terraform and OpenTofu
// users ask for the logs of providers and of their SDK.
var tfLogVariables = []string{"TF_LOG", "TF_LOG_PROVIDER", "TF_LOG_SDK", "TF_LOG_SDK_FRAMEWORK", "TF_LOG_SDK_PROTO"}

// sdkLogsOff are the settings that turn the plugin SDK's own logs off when
// none of tfLogVariables is set. The SDK then logs every call at TRACE
// anyway, which the CLI parses and drops: a sixth of the CPU of a no-change
// plan of 200 routes, in the provider and in the CLI together. Any of those
// variables set (TF_LOG=DEBUG to debug, say) leaves the logs as they are.
func sdkLogsOff(getenv func(string) string) map[string]string {
	for _, name := range tfLogVariables {
		if getenv(name) != "" {
			return nil
		}
	}
	return map[string]string{"TF_LOG_SDK": "off", "TF_LOG_SDK_FRAMEWORK": "off", "TF_LOG_SDK_PROTO": "off"}
}

// cpuProfileVariable names a file prefix: each provider process writes its
// CPU profile to PREFIX.PID.pprof (go tool pprof reads it), for finding
// where a slow plan or apply spends its time (docs/performance.md).
const cpuProfileVariable = "VARNISHGW_CPU_PROFILE"

// startCPUProfile starts the CPU profile cpuProfileVariable asks for, and
// returns what stops it.
func startCPUProfile(prefix string) (stop func(), err error) {
	if prefix == "" {
		return func() {}, nil
	}
	f, err := os.Create(fmt.Sprintf("%s.%d.pprof", prefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cpuProfileVariable, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", cpuProfileVariable, err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

func main() {
	var debugMode bool
	flag.BoolVar(&debugMode, "debug", false, "run the provider with support for debuggers like delve")
	flag.Parse()

	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if !debugMode {
		for name, value := range sdkLogsOff(os.Getenv) {
			if err := os.Setenv(name, value); err != nil {
				log.Fatalf("set %s=%s: %v", name, value, err)
			}
		}
	}
	stopProfile, err := startCPUProfile(os.Getenv(cpuProfileVariable))
	if err != nil {
		log.Fatal(err)
	}
	err = providerserver.Serve(context.Background(), provider.New(version.String()), providerserver.ServeOpts{
		Address: provider.Address,
		Debug:   debugMode,
	})
	stopProfile()
	if err != nil {
		log.Fatal(err)
	}
}
