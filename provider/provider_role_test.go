package provider

import (
	"bytes"
	"os"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestSecurityGuideRoles: the ClusterRoles the security guide tells users
// to create are the provider's rules in the code.
func TestSecurityGuideRoles(t *testing.T) {
	data, err := os.ReadFile("../templates/guides/security.md.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(data)
	if m == nil {
		t.Fatal("no yaml block in the security guide")
	}
	docs := bytes.Split(m[1], []byte("\n---\n"))
	want := map[string][]rbacv1.PolicyRule{
		ProviderClusterRoleName:   ProviderClusterRules(),
		ProviderNamespaceRoleName: ProviderNamespaceRules(),
	}
	if len(docs) != len(want) {
		t.Fatalf("%d YAML documents in the guide, want %d", len(docs), len(want))
	}
	for _, d := range docs {
		var role rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict(d, &role); err != nil {
			t.Fatalf("guide YAML: %v\n%s", err, d)
		}
		rules, ok := want[role.Name]
		if !ok || role.Kind != "ClusterRole" {
			t.Errorf("the guide has %s %q, want ClusterRoles %q and %q", role.Kind, role.Name, ProviderClusterRoleName, ProviderNamespaceRoleName)
			continue
		}
		if diff := cmp.Diff(rules, role.Rules); diff != "" {
			t.Errorf("the guide's %s differs from the code (-code +guide):\n%s", role.Name, diff)
		}
	}
}
