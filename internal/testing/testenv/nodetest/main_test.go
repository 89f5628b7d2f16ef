package nodetest

import (
	"fmt"
	"os"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	if os.Getenv(envPrintSupported) == "1" {
		// A child of TestNodeSupportedSaysWhy.
		fmt.Println("NodeSupported:", testenv.NodeSupported())
		os.Exit(0)
	}
	testenv.Main(m, testenv.WithNode())
}
