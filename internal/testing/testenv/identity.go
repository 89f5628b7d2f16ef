package testenv

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
)

// Namespace creates a namespace with a unique name derived from the test's
// name and deletes it when the test ends. (Without a node there is no
// kube-controller-manager, so a deleted namespace stays Terminating; unique
// names keep tests apart. With a node it goes, with what it held.)
func (cp *ControlPlane) Namespace(t testing.TB) string {
	t.Helper()
	base := strings.ToLower(t.Name())
	base = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, base)
	if len(base) > 40 {
		base = base[:40]
	}
	name := strings.Trim(base, "-") + "-" + rand.String(5)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := cp.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	return name
}

// ServiceAccountConfig creates the ServiceAccount namespace/name if it does
// not exist and returns a client configuration that authenticates as it with
// a real, API-server-signed token (TokenRequest), valid for an hour. The
// ServiceAccount has only the permissions that RBAC objects grant it.
func (cp *ControlPlane) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := cp.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create service account %s/%s: %w", namespace, name, err)
	}
	ttl := int64(time.Hour / time.Second)
	tr, err := cp.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}},
		metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("request token for service account %s/%s: %w", namespace, name, err)
	}
	return &rest.Config{
		Host:            cp.Config.Host,
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.caPEM},
		QPS:             cp.Config.QPS,
		Burst:           cp.Config.Burst,
	}, nil
}

// ServiceAccountKubeconfig is ServiceAccountConfig written as a kubeconfig
// file in the control plane's directory, for processes such as terraform or
// the chaperone. It returns the file's path.
func (cp *ControlPlane) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) (string, error) {
	cfg, err := cp.ServiceAccountConfig(ctx, namespace, name)
	if err != nil {
		return "", err
	}
	path := filepath.Join(cp.Dir, fmt.Sprintf("sa-%s-%s-%s.kubeconfig", namespace, name, rand.String(5)))
	user := "system:serviceaccount:" + namespace + ":" + name
	if err := writeKubeconfig(path, cfg.Host, cp.caPEM, user, cfg.BearerToken); err != nil {
		return "", err
	}
	return path, nil
}

// GrantRole creates Role ns/name with rules and binds it to ServiceAccount
// saNamespace/sa, failing the test on error.
func (cp *ControlPlane) GrantRole(t testing.TB, ns, name, saNamespace, sa string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	if _, err := cp.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Role %s/%s: %v", ns, name, err)
	}
	if _, err := cp.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNamespace, Name: sa}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create RoleBinding %s/%s: %v", ns, name, err)
	}
}
