package main

import (
	"maps"
	"testing"
)

func TestSDKLogsOff(t *testing.T) {
	off := map[string]string{"TF_LOG_SDK": "off", "TF_LOG_SDK_FRAMEWORK": "off", "TF_LOG_SDK_PROTO": "off"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want map[string]string
	}{
		{"no log asked for", nil, off},
		{"an unrelated variable", map[string]string{"TF_LOG_PATH": "/tmp/tf.log"}, off},
		{"TF_LOG", map[string]string{"TF_LOG": "DEBUG"}, nil},
		{"TF_LOG_PROVIDER", map[string]string{"TF_LOG_PROVIDER": "TRACE"}, nil},
		{"TF_LOG_SDK", map[string]string{"TF_LOG_SDK": "INFO"}, nil},
		{"TF_LOG_SDK_FRAMEWORK", map[string]string{"TF_LOG_SDK_FRAMEWORK": "TRACE"}, nil},
		{"TF_LOG_SDK_PROTO", map[string]string{"TF_LOG_SDK_PROTO": "TRACE"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sdkLogsOff(func(k string) string { return tc.env[k] })
			if !maps.Equal(got, tc.want) {
				t.Errorf("sdkLogsOff(%v) = %v, want %v", tc.env, got, tc.want)
			}
		})
	}
}
