package cluster

import (
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.WithNode()) }
