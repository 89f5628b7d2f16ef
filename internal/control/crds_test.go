package control

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func TestCRDHasField(t *testing.T) {
	obj := func(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	}
	list := func(item apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item}}
	}
	crd := func(version string, rule apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceDefinition {
		root := obj(map[string]apiextensionsv1.JSONSchemaProps{"spec": obj(map[string]apiextensionsv1.JSONSchemaProps{"rules": list(rule)})})
		return &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1beta1", Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{}}},
				{Name: version, Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &root}},
			}}}
	}
	experimental := obj(map[string]apiextensionsv1.JSONSchemaProps{"matches": list(obj(nil)),
		"retry": obj(map[string]apiextensionsv1.JSONSchemaProps{"codes": list(apiextensionsv1.JSONSchemaProps{Type: "integer"})})})
	standard := obj(map[string]apiextensionsv1.JSONSchemaProps{"matches": list(obj(nil))})
	for _, tc := range []struct {
		name  string
		crd   *apiextensionsv1.CustomResourceDefinition
		field string
		want  bool
	}{
		{"experimental retry", crd("v1", experimental), "rules[].retry", true},
		{"nested field", crd("v1", experimental), "rules[].retry.codes", true},
		{"list item of a nested field", crd("v1", experimental), "rules[].retry.codes[]", true},
		{"standard retry", crd("v1", standard), "rules[].retry", false},
		{"other field", crd("v1", experimental), "rules[].sessionPersistence", false},
		{"not a list", crd("v1", experimental), "rules[].retry[]", false},
		{"no v1 schema", crd("v2", experimental), "rules[].retry", false},
		{"no versions", &apiextensionsv1.CustomResourceDefinition{}, "rules[].retry", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CRDHasField(tc.crd, "v1", tc.field); got != tc.want {
				t.Errorf("crdHasField(%s) = %v, want %v", tc.field, got, tc.want)
			}
		})
	}
}
