package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// TestAccGatewayEscapedSlashes: escaped_slashes is written as the Gateway's
// escaped-slashes annotation (which the pods put into ghost.json), a change
// made to it outside Terraform shows in the plan, removing the argument
// removes the annotation, and a value other than reject or keep fails the
// plan at the argument.
func TestAccGatewayEscapedSlashes(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	class := "vgw-" + rand.String(6)
	createService(t, cp, ns, "web")
	ctx := context.Background()
	config := func(v string) string {
		arg := ""
		if v != "" {
			arg = fmt.Sprintf("  escaped_slashes = %q", v)
		}
		return cacheConfig(cp, ns, class, arg, "", "", "")
	}
	annotation := func(want string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			gw, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
			if err != nil {
				return err
			}
			got, ok := gw.Annotations[routing.EscapedSlashesAnnotation]
			switch {
			case want == "" && ok:
				return fmt.Errorf("annotation %s = %s, want none", routing.EscapedSlashesAnnotation, got)
			case want != "" && got != want:
				return fmt.Errorf("annotation %s = %q, want %q", routing.EscapedSlashesAnnotation, got, want)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config("bogus"), PlanOnly: true, ExpectError: words(`Attribute escaped_slashes value must be one of: \["reject" "keep"\], got: "bogus"`)},
			{Config: config("keep"), Check: annotation("keep")},
			{
				PreConfig: func() {
					gw, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					gw.Annotations[routing.EscapedSlashesAnnotation] = "reject"
					if _, err := cp.Gateway.GatewayV1().Gateways(ns).Update(ctx, gw, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config:             config("keep"),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{Config: config("keep"), Check: annotation("keep")},
			{Config: config(""), Check: annotation("")},
		},
	})
}
