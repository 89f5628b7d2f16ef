package gwruntime

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
)

func TestClassDefaultsMerge(t *testing.T) {
	class := func() *Class {
		return &Class{Image: "img:1", PullPolicy: "IfNotPresent", Storage: "malloc,1g", LogLevel: "info", Params: map[string]string{"a": "1", "b": "2"}, VCL: "class"}
	}
	d := class()
	if err := d.Merge(map[string]string{"image": "img:2", "image-pull-policy": "Always", "storage": "malloc,2g", "log-level": "debug", "varnishd-params.json": `{"b":"3","c":"4"}`}, false); err != nil {
		t.Fatal(err)
	}
	if d.Image != "img:2" || d.PullPolicy != "Always" || d.Storage != "malloc,2g" || d.LogLevel != "debug" || d.VCL != "class" ||
		!maps.Equal(d.Params, map[string]string{"a": "1", "b": "3", "c": "4"}) {
		t.Errorf("merged = %+v", d)
	}
	for data, want := range map[string]string{
		`{"user.vcl": "sub vcl_recv {}"}`:           "key user.vcl is a class parameter only",
		`{"replicas": "3"}`:                         `key "replicas" is not a gateway parameter`,
		`{"image-pull-policy": "Sometimes"}`:        `key image-pull-policy is "Sometimes", not Always, IfNotPresent or Never`,
		`{"image": "Bad Image"}`:                    `key image: image = "Bad Image" is not a container image reference`,
		`{"varnishd-params.json": "[1]"}`:           "key varnishd-params.json is not a JSON object of strings",
		`{"varnishd-params.json": "{\"X\":\"1\"}"}`: `"X" is not a varnishd parameter name`,
		`{"log-level": "loud"}`:                     `key log-level is "loud"`,
		`{"access-log": "true"}`:                    "key access-log is a class parameter only",
		`{"external-name-services": "true"}`:        "key external-name-services is a class parameter only; set external_name_services on the varnishgw_gateway_class",
	} {
		var m map[string]string
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatal(err)
		}
		err := class().Merge(m, false)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("merge(%s) = %v, want %q", data, err, want)
		}
	}
	d = class()
	if err := d.Merge(map[string]string{"access-log": "true"}, true); err != nil || !d.AccessLog {
		t.Errorf("class merge of access-log = %v, accessLog %v", err, d.AccessLog)
	}
	if err := class().Merge(map[string]string{"access-log": "yes"}, true); err == nil || !strings.Contains(err.Error(), `key access-log is "yes", not true or false`) {
		t.Errorf("class merge of access-log=yes = %v", err)
	}
	d = class()
	if err := d.Merge(map[string]string{"external-name-services": "true"}, true); err != nil || !d.ExternalNames {
		t.Errorf("class merge of external-name-services = %v, externalNames %v", err, d.ExternalNames)
	}
	if err := class().Merge(map[string]string{"external-name-services": "on"}, true); err == nil || !strings.Contains(err.Error(), `key external-name-services is "on", not true or false`) {
		t.Errorf("class merge of external-name-services=on = %v", err)
	}
	// A class's ConfigMap may hold user.vcl and keys of other versions.
	d = class()
	if err := d.Merge(map[string]string{"user.vcl": "new", "future-key": "x"}, true); err != nil || d.VCL != "new" {
		t.Errorf("class merge = %v, vcl %q", err, d.VCL)
	}
}
