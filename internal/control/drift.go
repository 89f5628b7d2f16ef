package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
)

// RuntimeDrift compares the runtime objects in the cluster with s and
// says what differs: a missing object, changed RBAC rules, missing labels
// or annotations, a Deployment that the provider's apply would change (dry
// is its dry run, dryRunDeployment), or changed Service ports. Empty when the
// runtime is intact.
func (c *Cluster) RuntimeDrift(ctx context.Context, s *gwruntime.Spec, dry *appsv1.Deployment) (string, error) {
	ns, name := s.Gateway.Namespace, s.Name()
	lbl, ann := s.ObjectLabels(), s.ObjectAnnotations()
	missing := func(what string, err error) (string, error) {
		if apierrors.IsNotFound(err) {
			return what + " is missing", nil
		}
		return "", fmt.Errorf("get %s: %w", what, err)
	}
	relabelled := func(what string, o metav1.Object) string {
		if !hasMetadata(o, lbl, ann) {
			return "the labels or annotations of " + what + " changed"
		}
		return ""
	}
	sa, err := c.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return missing("ServiceAccount "+ns+"/"+name, err)
	}
	if d := relabelled("ServiceAccount "+ns+"/"+name, sa); d != "" {
		return d, nil
	}
	role, err := c.Kube.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return missing("Role "+ns+"/"+name, err)
	}
	if !equality.Semantic.DeepEqual(role.Rules, s.GatewayRules()) {
		return "the rules of Role " + ns + "/" + name + " changed", nil
	}
	if d := relabelled("Role "+ns+"/"+name, role); d != "" {
		return d, nil
	}
	rb, err := c.Kube.RbacV1().RoleBindings(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return missing("RoleBinding "+ns+"/"+name, err)
	}
	if rb.RoleRef.Name != name || len(rb.Subjects) != 1 || rb.Subjects[0].Name != name || rb.Subjects[0].Namespace != ns {
		return "RoleBinding " + ns + "/" + name + " changed", nil
	}
	if d := relabelled("RoleBinding "+ns+"/"+name, rb); d != "" {
		return d, nil
	}
	cr, err := c.Kube.RbacV1().ClusterRoles().Get(ctx, gwruntime.BackendClusterRoleName(s.Gateway), metav1.GetOptions{})
	if err != nil {
		return missing("ClusterRole "+gwruntime.BackendClusterRoleName(s.Gateway), err)
	}
	if !equality.Semantic.DeepEqual(cr.Rules, gwruntime.BackendRules()) {
		return "the rules of ClusterRole " + cr.Name + " changed", nil
	}
	if d := relabelled("ClusterRole "+cr.Name, cr); d != "" {
		return d, nil
	}
	d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return missing("Deployment "+ns+"/"+name, err)
	}
	if diff := deploymentDrift(d, dry); diff != "" {
		return "the Deployment " + ns + "/" + name + " differs from what the provider writes in " + diff, nil
	}
	svc, err := c.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return missing("Service "+ns+"/"+name, err)
	}
	var ports []int32
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Port)
	}
	if !slices.Equal(ports, s.Ports) || !equality.Semantic.DeepEqual(svc.Spec.Selector, gwruntime.Labels(s.Gateway)) {
		return "the ports or selector of Service " + ns + "/" + name + " changed", nil
	}
	if d := relabelled("Service "+ns+"/"+name, svc); d != "" {
		return d, nil
	}
	others := s.CertificateSecretNames()
	delete(others, ns)
	for _, other := range slices.Sorted(maps.Keys(others)) {
		what := "Role " + other + "/" + gwruntime.CertificateRoleName(s.Gateway)
		r, err := c.Kube.RbacV1().Roles(other).Get(ctx, gwruntime.CertificateRoleName(s.Gateway), metav1.GetOptions{})
		if err != nil {
			return missing(what, err)
		}
		if !equality.Semantic.DeepEqual(r.Rules, gwruntime.CertificateRules(others[other], true)) {
			return "the rules of " + what + " changed", nil
		}
		if _, err := c.Kube.RbacV1().RoleBindings(other).Get(ctx, gwruntime.CertificateRoleName(s.Gateway), metav1.GetOptions{}); err != nil {
			return missing("RoleBinding "+other+"/"+gwruntime.CertificateRoleName(s.Gateway), err)
		}
	}
	lsets := s.ListenerSetNames()
	for _, other := range slices.Sorted(maps.Keys(lsets)) {
		roleName := gwruntime.ListenerSetStatusRoleName(s.Gateway)
		what := "Role " + other + "/" + roleName
		r, err := c.Kube.RbacV1().Roles(other).Get(ctx, roleName, metav1.GetOptions{})
		if err != nil {
			return missing(what, err)
		}
		if !equality.Semantic.DeepEqual(r.Rules, gwruntime.ListenerSetStatusRules(lsets[other])) {
			return "the rules of " + what + " changed", nil
		}
		if _, err := c.Kube.RbacV1().RoleBindings(other).Get(ctx, roleName, metav1.GetOptions{}); err != nil {
			return missing("RoleBinding "+other+"/"+roleName, err)
		}
	}
	if d, err := c.invalidateAuthBindingDrift(ctx, s); d != "" || err != nil {
		return d, err
	}
	if s.Mode == gwruntime.ModeSidecar {
		sec, err := c.Kube.CoreV1().Secrets(ns).Get(ctx, gwruntime.AdminSecretName(s.Gateway), metav1.GetOptions{})
		if err != nil {
			return missing("Secret "+ns+"/"+gwruntime.AdminSecretName(s.Gateway), err)
		}
		if d := relabelled("Secret "+ns+"/"+sec.Name, sec); d != "" {
			return d, nil
		}
	}
	return "", nil
}

// ensureAdminSecret creates, in sidecar mode, the Secret with the admin
// secret of varnishd (32 random bytes, hex encoded) unless it exists: it is
// not rewritten, so applies do not roll the pods. In supervise mode the
// chaperone makes a secret of its own and the Secret is not needed.
func (c *Cluster) ensureAdminSecret(ctx context.Context, s *gwruntime.Spec, owner *metav1apply.OwnerReferenceApplyConfiguration) error {
	ns, name := s.Gateway.Namespace, gwruntime.AdminSecretName(s.Gateway)
	if s.Mode != gwruntime.ModeSidecar {
		old, err := c.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || old.Labels[gwruntime.NamespaceLabel] != ns || old.Labels["app.kubernetes.io/managed-by"] != gwruntime.ManagedBy {
			return nil // none, or not ours
		}
		err = c.Kube.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &old.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Secret %s/%s, which supervise mode does not use: %w", ns, name, err)
		}
		return nil
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return fmt.Errorf("make the varnishd admin secret: %w", err)
	}
	// Created once with the runtime labels, then its labels and annotations
	// are applied: an apply of the metadata alone leaves the data, which
	// the create wrote, alone, and drops infrastructure labels that are
	// gone.
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: gwruntime.RuntimeLabels(s.Gateway)},
		Data:       map[string][]byte{gwruntime.SecretKey: []byte(hex.EncodeToString(buf) + "\n")},
	}
	if _, err := c.Kube.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{FieldManager: FieldManager}); apierrors.IsAlreadyExists(err) {
		old, err := c.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get Secret %s/%s: %w", ns, name, err)
		}
		if old.Labels[gwruntime.NamespaceLabel] != ns || old.Labels["app.kubernetes.io/managed-by"] != gwruntime.ManagedBy {
			return nil // not ours: used as it is
		}
	} else if err != nil {
		return fmt.Errorf("create Secret %s/%s with the varnishd admin secret: %w", ns, name, err)
	}
	ac := corev1apply.Secret(name, ns).WithLabels(s.ObjectLabels()).WithAnnotations(s.ObjectAnnotations()).WithOwnerReferences(owner)
	if _, err := c.Kube.CoreV1().Secrets(ns).Apply(ctx, ac, ApplyOptions()); err != nil {
		return fmt.Errorf("apply the labels and annotations of Secret %s/%s: %w", ns, name, err)
	}
	return nil
}

// hasMetadata reports whether o carries every label and annotation given.
func hasMetadata(o metav1.Object, labels, annotations map[string]string) bool {
	for k, v := range labels {
		if got, ok := o.GetLabels()[k]; !ok || got != v {
			return false
		}
	}
	for k, v := range annotations {
		if got, ok := o.GetAnnotations()[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// deploymentDrift compares the live Deployment with the dry run of the
// provider's apply: empty when applying would change nothing the provider
// writes (replicas aside, which an attribute shows), otherwise what
// differs, by field path.
func deploymentDrift(live, want *appsv1.Deployment) string {
	var diffs []string
	if !equality.Semantic.DeepEqual(live.Labels, want.Labels) {
		diffs = append(diffs, "metadata.labels")
	}
	if !equality.Semantic.DeepEqual(live.Annotations, want.Annotations) {
		diffs = append(diffs, "metadata.annotations")
	}
	diffs = append(diffs, fieldDiffs("spec", live.Spec, want.Spec, "replicas", "template")...)
	diffs = append(diffs, fieldDiffs("spec.template.metadata", live.Spec.Template.ObjectMeta, want.Spec.Template.ObjectMeta)...)
	diffs = append(diffs, fieldDiffs("spec.template.spec", live.Spec.Template.Spec, want.Spec.Template.Spec, "containers")...)
	liveC, wantC := live.Spec.Template.Spec.Containers, want.Spec.Template.Spec.Containers
	if len(liveC) != len(wantC) {
		diffs = append(diffs, "spec.template.spec.containers")
	} else {
		for i := range wantC {
			diffs = append(diffs, fieldDiffs("spec.template.spec.containers["+wantC[i].Name+"]", liveC[i], wantC[i])...)
		}
	}
	return strings.Join(diffs, ", ")
}

// fieldDiffs names the fields of the structs a and b (of one type) that
// differ semantically, by JSON name under prefix, skipping skip.
func fieldDiffs(prefix string, a, b any, skip ...string) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := range va.NumField() {
		f := va.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || slices.Contains(skip, name) {
			continue
		}
		if !equality.Semantic.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, prefix+"."+name)
		}
	}
	return out
}
