package provider

import (
	"encoding/json"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// fill sets every field reachable from v to a non-zero value (one element
// per slice and map), so that a conversion that drops a field shows in the
// JSON form.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	}
}

// TestHTTPRouteApply checks that httpRouteApply converts every field of
// the typed spec: its JSON form is the typed route's.
func TestHTTPRouteApply(t *testing.T) {
	full := gatewayv1.HTTPRouteSpec{}
	fill(reflect.ValueOf(&full).Elem())
	for _, tc := range []struct {
		name  string
		route *gatewayv1.HTTPRoute
	}{
		{"every field set", &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", Labels: map[string]string{"a": "b"}}, Spec: full}},
		{"the least route", &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ac := httpRouteApply(tc.route)
			if got, want := jsonOf(t, ac.Spec), jsonOf(t, tc.route.Spec); got != want {
				t.Errorf("spec of the apply configuration:\n%s\nwant the typed route's:\n%s", got, want)
			}
			if *ac.Name != tc.route.Name || *ac.Namespace != tc.route.Namespace || !reflect.DeepEqual(ac.Labels, tc.route.Labels) {
				t.Errorf("metadata %s/%s %v, want %s/%s %v", *ac.Namespace, *ac.Name, ac.Labels, tc.route.Namespace, tc.route.Name, tc.route.Labels)
			}
		})
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
