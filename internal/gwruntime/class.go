package gwruntime

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
)

// Defaults of a gateway class. The image has none: no image is published,
// and a default that names a missing image fails in the cluster instead of
// at plan time.
const (
	DefaultStorage         = "malloc,256m"
	DefaultImagePullPolicy = string(corev1.PullIfNotPresent)
)

// Keys of a class's parameters ConfigMap (and of a Gateway's
// infrastructure.parametersRef ConfigMap, which may set the first five).
const (
	ClassKeyImage           = "image"
	ClassKeyImagePullPolicy = "image-pull-policy"
	ClassKeyStorage         = "storage"
	ClassKeyParams          = "varnishd-params.json"
	ClassKeyVCL             = "user.vcl"
	ClassKeyLogLevel        = "log-level"
	ClassKeyAccessLog       = "access-log"
	ClassKeyExternalNames   = "external-name-services"
)

// ParamName matches a varnishd parameter name.
var ParamName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// ParseImage parses a container image reference with the rules of the
// kubelet, which uses the same package: an image that parses here never
// gives the pods InvalidImageName.
func ParseImage(image string) (reference.Named, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return nil, fmt.Errorf("image = %q is not a container image reference (%v); use a lower-case name with a tag or a digest, "+
			"for example localhost/varnishgw/gateway:1.0.0 or registry.example.com/varnishgw/gateway@sha256:<64 hex digits>", image, err)
	}
	return named, nil
}

// Class are the GatewayClass parameters a gateway inherits.
type Class struct {
	Image, PullPolicy, Storage, VCL, LogLevel string
	Params                                    map[string]string
	AccessLog                                 bool
	// ExternalNames: the class's external_name_services (chaperone
	// --external-name-services).
	ExternalNames bool
}

// NewClass is a Class with the defaults a parameters ConfigMap overrides.
func NewClass() *Class {
	return &Class{Storage: DefaultStorage, PullPolicy: DefaultImagePullPolicy, LogLevel: "info", Params: map[string]string{}}
}

// Clone is a copy of d that shares no map with it.
func (d *Class) Clone() *Class {
	out := *d
	out.Params = maps.Clone(d.Params)
	return &out
}

// Merge sets d from the data of a parameters ConfigMap: each key present
// replaces d's value, and varnishd parameters are merged by name. A
// class's ConfigMap (class true) may hold user.vcl; anything else, or a
// value the pods could not use, is an error naming the key.
func (d *Class) Merge(data map[string]string, class bool) error {
	for _, k := range slices.Sorted(maps.Keys(data)) {
		v := data[k]
		switch k {
		case ClassKeyImage:
			if _, err := ParseImage(v); err != nil {
				return fmt.Errorf("key %s: %w", k, err)
			}
			d.Image = v
		case ClassKeyImagePullPolicy:
			switch corev1.PullPolicy(v) {
			case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
			default:
				return fmt.Errorf("key %s is %q, not Always, IfNotPresent or Never", k, v)
			}
			d.PullPolicy = v
		case ClassKeyStorage:
			if v == "" {
				return fmt.Errorf("key %s is empty; give a varnishd storage such as malloc,1g", k)
			}
			d.Storage = v
		case ClassKeyLogLevel:
			if !slices.Contains([]string{"debug", "info", "warn", "error"}, v) {
				return fmt.Errorf("key %s is %q, not debug, info, warn or error", k, v)
			}
			d.LogLevel = v
		case ClassKeyParams:
			params := map[string]string{}
			if err := json.Unmarshal([]byte(v), &params); err != nil {
				return fmt.Errorf("key %s is not a JSON object of strings (%v)", k, err)
			}
			for name, pv := range params {
				if !ParamName.MatchString(name) {
					return fmt.Errorf("key %s: %q is not a varnishd parameter name", k, name)
				}
				d.Params[name] = pv
			}
		case ClassKeyAccessLog:
			if !class {
				return fmt.Errorf("key %s is a class parameter only; set access_log on the varnishgw_gateway_class", k)
			}
			switch v {
			case "true", "false":
				d.AccessLog = v == "true"
			default:
				return fmt.Errorf("key %s is %q, not true or false", k, v)
			}
		case ClassKeyExternalNames:
			if !class {
				return fmt.Errorf("key %s is a class parameter only; set external_name_services on the varnishgw_gateway_class", k)
			}
			switch v {
			case "true", "false":
				d.ExternalNames = v == "true"
			default:
				return fmt.Errorf("key %s is %q, not true or false", k, v)
			}
		case ClassKeyVCL:
			if !class {
				return fmt.Errorf("key %s is a class parameter only; set the gateway's own VCL with the vcl attribute of varnishgw_gateway", k)
			}
			d.VCL = v
		default:
			if class {
				continue // written by another version of the provider
			}
			return fmt.Errorf("key %q is not a gateway parameter; the keys are %s, %s, %s, %s and %s",
				k, ClassKeyImage, ClassKeyImagePullPolicy, ClassKeyStorage, ClassKeyParams, ClassKeyLogLevel)
		}
	}
	return nil
}

// ClassParametersName is the name of a class's parameters ConfigMap.
func ClassParametersName(class string) string { return "varnishgw-class-" + class }
