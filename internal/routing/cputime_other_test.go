//go:build !unix

package routing

import "time"

func processCPU() time.Duration { return 0 }
