package provider

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// TestAccGatewayCertificateRoleUpgrade: the Role and RoleBinding that let
// a gateway's pods read a certificate Secret in another namespace, which
// earlier releases named gwruntime.LegacyCertificateRoleName (shared by
// the gateways a-b/c and a/b-c), are renamed by the gateway's next apply:
// the plan sees the Role of the new name missing, the apply writes it
// before it deletes the old one, so the pods keep their right throughout;
// and an old one left beside the new is deleted with the new when no
// listener references the namespace any more.
func TestAccGatewayCertificateRoleUpgrade(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	ns, certs := cp.Namespace(t), cp.Namespace(t)
	class := className(t, cp)
	gw := routing.ObjectRef{Namespace: ns, Name: "edge"}
	current, legacy := gwruntime.CertificateRoleName(gw), gwruntime.LegacyCertificateRoleName(gw)
	withShop := gatewayConfig(cp, ns, class, "", listenerHCL("http", 8080)+shopListenerHCL(certs))
	withoutShop := gatewayConfig(cp, ns, class, "", listenerHCL("http", 8080))

	exists := func(name string) error {
		if _, err := cp.Client.RbacV1().Roles(certs).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("Role %s/%s: %v", certs, name, err)
		}
		if _, err := cp.Client.RbacV1().RoleBindings(certs).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("RoleBinding %s/%s: %v", certs, name, err)
		}
		return nil
	}
	gone := func(name string) error {
		if _, err := cp.Client.RbacV1().Roles(certs).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Role %s/%s: %v, want NotFound", certs, name, err)
		}
		if _, err := cp.Client.RbacV1().RoleBindings(certs).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("RoleBinding %s/%s: %v, want NotFound", certs, name, err)
		}
		return nil
	}
	// writeLegacy writes the Role and RoleBinding of the new name again
	// under the legacy name, as an earlier release wrote them (removing
	// those of the new name when replace is set).
	writeLegacy := func(replace bool) {
		t.Helper()
		role, err := cp.Client.RbacV1().Roles(certs).Get(ctx, current, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rb, err := cp.Client.RbacV1().RoleBindings(certs).Get(ctx, current, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		meta := func(o metav1.ObjectMeta) metav1.ObjectMeta {
			return metav1.ObjectMeta{Name: legacy, Namespace: certs, Labels: o.Labels, Annotations: o.Annotations}
		}
		if _, err := cp.Client.RbacV1().Roles(certs).Create(ctx, &rbacv1.Role{ObjectMeta: meta(role.ObjectMeta), Rules: role.Rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rb2 := &rbacv1.RoleBinding{ObjectMeta: meta(rb.ObjectMeta), Subjects: rb.Subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: legacy}}
		if _, err := cp.Client.RbacV1().RoleBindings(certs).Create(ctx, rb2, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if replace {
			if err := cp.Client.RbacV1().RoleBindings(certs).Delete(ctx, current, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := cp.Client.RbacV1().Roles(certs).Delete(ctx, current, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	events := watchRoleBindings(t, cp, certs)

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: withShop,
				Check: func(*terraform.State) error {
					if current == legacy {
						return fmt.Errorf("the certificate Role keeps its legacy name %s", legacy)
					}
					if err := exists(current); err != nil {
						return err
					}
					return gone(legacy)
				},
			},
			{
				// The state an earlier release left: only the legacy name.
				PreConfig: func() {
					writeLegacy(true)
					events.reset()
				},
				Config: withShop,
				Check: func(*terraform.State) error {
					if err := exists(current); err != nil {
						return err
					}
					if err := gone(legacy); err != nil {
						return err
					}
					seen := events.until("DELETED " + legacy)
					added, deleted := slices.Index(seen, "ADDED "+current), slices.Index(seen, "DELETED "+legacy)
					if added < 0 || deleted < 0 || added > deleted {
						return fmt.Errorf("RoleBinding events %v: want %s added before %s is deleted", seen, current, legacy)
					}
					return nil
				},
			},
			{
				// No listener references certs any more: both names go.
				PreConfig: func() { writeLegacy(false) },
				Config:    withoutShop,
				Check: func(*terraform.State) error {
					if err := gone(current); err != nil {
						return err
					}
					return gone(legacy)
				},
			},
		},
	})
}
