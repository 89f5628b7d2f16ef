package provider

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8srand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/invalidation"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// This file holds the helpers the provider's tests share.

// mustJSON is v encoded as JSON, for messages and comparisons.
func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// invalidationPod is one Ready gateway pod for the invalidation wait: a
// Pod object marked Ready and the chaperone's own invalidation.Applier
// (informer, acknowledgements in the GatewayPodReport), whose bans go to
// a list instead of a varnishd (the chaperone's tests ban in a real
// varnishd). A stopped pod acknowledges nothing.
type invalidationPod struct {
	name string
	mu   sync.Mutex
	bans [][]string
	stop context.CancelFunc
}

func startInvalidationPod(t *testing.T, cp *testenv.ControlPlane, gw object.Ref, name string, apply bool) *invalidationPod {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p := &invalidationPod{name: name, stop: cancel}
	if _, err := cp.Client.CoreV1().ServiceAccounts(gw.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	created, err := cp.Client.CoreV1().Pods(gw.Namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: gw.Namespace, Labels: gwruntime.Labels(gw)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "chaperone", Image: "example.invalid/none:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := cp.Client.CoreV1().Pods(gw.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := vgwapi.EnsureCRDs(ctx, apiextensionsclient.NewForConfigOrDie(cp.Config)); err != nil {
		t.Fatal(err)
	}
	if !apply {
		return p
	}
	a := invalidation.New(invalidation.Config{
		Dynamic: dynamic.NewForConfigOrDie(cp.Config), Gateway: gw, Pod: vgwapi.Pod{Name: name},
		Ban: func(_ context.Context, args []string) error {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.bans = append(p.bans, args)
			return nil
		},
	})
	go func() {
		if err := a.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("pod %s: %v", name, err)
		}
	}()
	return p
}

// cacheConfig is a class, the gateway "edge" with gwCache (a cache block or
// "") and a route "web" of three rules, whose second and third have the
// cache blocks rule1 and rule2 ("" for none), and rule0 for the first.
func cacheConfig(cp *testenv.ControlPlane, ns, class, gwCache, rule0, rule1, rule2 string) string {
	return providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_gateway_class" "test" {
  name                 = %[1]q
  parameters_namespace = %[2]q
  image                = %[3]q
}

resource "varnishgw_gateway" "test" {
  namespace          = %[2]q
  name               = "edge"
  gateway_class_name = varnishgw_gateway_class.test.name
  wait_for_rollout   = false
  listener {
    name = "http"
    port = 8080
  }
%[4]s
}

resource "varnishgw_http_route" "test" {
  namespace       = %[2]q
  name            = "web"
  wait_for_served = false
  parent_ref {
    name = varnishgw_gateway.test.name
  }
  rule {
    match {
      path {
        value = "/"
      }
    }
    backend_ref {
      name = "web"
      port = 80
    }
%[5]s
  }
  rule {
    match {
      path {
        value = "/static"
      }
    }
    backend_ref {
      name = "web"
      port = 80
    }
%[6]s
  }
  rule {
    match {
      path {
        value = "/account"
      }
    }
    backend_ref {
      name = "web"
      port = 80
    }
%[7]s
  }
}
`, class, ns, testImage, gwCache, rule0, rule1, rule2)
}

func ptrTo[T any](v T) *T { return &v }

// tlsSecret is a Secret of type kubernetes.io/tls with a self-signed
// certificate for host, made in the test, and its private key in PEM.
func tlsSecret(t *testing.T, ns, name, host string) (*corev1.Secret, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			corev1.TLSPrivateKeyKey: []byte(keyPEM),
		},
	}, keyPEM
}

func equalRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs) &&
		slices.Equal(a.ResourceNames, b.ResourceNames)
}

// providerIdentity creates a ServiceAccount holding the provider's roles
// of the security guide: clusterRules bound cluster-wide,
// ProviderNamespaceRules in each of namespaces. It returns its kubeconfig
// and a client with its real token.
func providerIdentity(t *testing.T, cp *testenv.ControlPlane, clusterRules []rbacv1.PolicyRule, namespaces ...string) (string, kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	idNS := cp.Namespace(t)
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "provider-" + idNS}, Rules: clusterRules}
	if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: cr.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: idNS, Name: "terraform"}}}
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
		_ = cp.Client.RbacV1().ClusterRoles().Delete(context.Background(), cr.Name, metav1.DeleteOptions{})
	})
	if _, err := cp.Client.CoreV1().ServiceAccounts(idNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "terraform"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range namespaces {
		cp.GrantRole(t, n, "provider-gateways", idNS, "terraform", ProviderNamespaceRules())
	}
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, idNS, "terraform")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := cp.ServiceAccountConfig(ctx, idNS, "terraform")
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfig, kube
}

// identityClassHCL is the head of the configurations of the tests that
// run the provider as providerIdentity: the provider acting through
// kubeconfig, and the class class with its parameters in ns.
func identityClassHCL(kubeconfig, class, ns string) string {
	return fmt.Sprintf(`
provider "varnishgw" {
  config_path = %q
}

resource "varnishgw_gateway_class" "test" {
  name                 = %q
  parameters_namespace = %q
  image                = %q
}
`, kubeconfig, class, ns, testImage)
}

// testImage is the class image of the tests. No kubelet pulls it: the test
// control plane has none.
const testImage = "localhost/varnishgw/gateway:test"

// gatewayConfig is a class with image testImage and a gateway named "edge"
// in ns; classBody and gwBody are added to the resources.
func gatewayConfig(cp *testenv.ControlPlane, ns, class, classBody, gwBody string) string {
	return providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_gateway_class" "test" {
  name                 = %q
  parameters_namespace = %q
  image                = %q
%s
}

resource "varnishgw_gateway" "test" {
  namespace          = %q
  name               = "edge"
  gateway_class_name = varnishgw_gateway_class.test.name
  wait_for_rollout   = false
%s
}
`, class, ns, testImage, classBody, ns, gwBody)
}

// className is a new GatewayClass name for a test whose configuration
// declares the class. The class is deleted when the test ends, in case the
// test stops before Terraform destroys it.
func className(t *testing.T, cp *testenv.ControlPlane) string {
	t.Helper()
	class := "vgw-" + k8srand.String(6)
	t.Cleanup(func() {
		_ = cp.Gateway.GatewayV1().GatewayClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	return class
}

func getDeployment(cp *testenv.ControlPlane, gw object.Ref) (*appsv1.Deployment, error) {
	return cp.Client.AppsV1().Deployments(gw.Namespace).Get(context.Background(), gwruntime.Name(gw), metav1.GetOptions{})
}

// listenerHCL is a listener block.
func listenerHCL(name string, port int) string {
	return fmt.Sprintf("  listener {\n    name = %q\n    port = %d\n  }\n", name, port)
}

// words is a regular expression for pattern whose spaces match any white
// space, as terraform wraps long error messages.
func words(pattern string) *regexp.Regexp {
	return regexp.MustCompile(strings.ReplaceAll(pattern, " ", `\s+`))
}

func testSpec() *gwruntime.Spec {
	vcl := "sub vcl_deliver { }"
	return &gwruntime.Spec{
		Gateway:         object.Ref{Namespace: "edge", Name: "public"},
		Class:           &gwruntime.Class{Image: "img:1", PullPolicy: "IfNotPresent", Storage: "malloc,1g", LogLevel: "info", Params: map[string]string{"b": "2", "a": "1"}, VCL: "sub vcl_recv { }"},
		GatewayVCL:      &vcl,
		Ports:           []int32{80, 8080},
		Replicas:        2,
		Mode:            gwruntime.ModeSupervise,
		DrainTimeout:    60,
		SidecarVarnishd: varnishdArgs,
	}
}

// httpsSpec is testSpec with an HTTPS listener on 8443 whose certificates
// are two Secrets of the gateway's namespace and one of namespace certs.
func httpsSpec(mode string) *gwruntime.Spec {
	s := testSpec()
	s.Mode = mode
	s.Ports = []int32{80, 8080, 8443}
	s.TLSPorts = []int32{8443}
	s.CertSecrets = []object.Ref{{Namespace: "certs", Name: "shared"}, {Namespace: "edge", Name: "api"}, {Namespace: "edge", Name: "www"}}
	return s
}

// routeFixture creates, with the admin client, a varnishgw GatewayClass, a
// Gateway in ns with an HTTP listener for hostname (any host when empty)
// and Services web and api (port 80) in ns.
func routeFixture(t *testing.T, cp *testenv.ControlPlane, ns, hostname string) (gateway string) {
	t.Helper()
	createGateway(t, cp, ns, "gw", createClass(t, cp, gwruntime.ControllerName), hostname)
	for _, name := range []string{"web", "api"} {
		createService(t, cp, ns, name)
	}
	return "gw"
}

// createClass creates a GatewayClass with controller and returns its name.
func createClass(t *testing.T, cp *testenv.ControlPlane, controller string) string {
	t.Helper()
	class := className(t, cp)
	gc := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Spec: gatewayv1.GatewayClassSpec{ControllerName: gatewayv1.GatewayController(controller)}}
	if _, err := cp.Gateway.GatewayV1().GatewayClasses().Create(context.Background(), gc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return class
}

// createGateway creates a Gateway with one HTTP listener on port 8080 for
// hostname (any host when empty).
func createGateway(t *testing.T, cp *testenv.ControlPlane, ns, name, class, hostname string) {
	t.Helper()
	listener := gatewayv1.Listener{Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType}
	if hostname != "" {
		h := gatewayv1.Hostname(hostname)
		listener.Hostname = &h
	}
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(class), Listeners: []gatewayv1.Listener{listener}},
	}
	if _, err := cp.Gateway.GatewayV1().Gateways(ns).Create(context.Background(), gw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createService(t *testing.T, cp *testenv.ControlPlane, ns, name string) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if _, err := cp.Client.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func getRoute(ns, name string, cp *testenv.ControlPlane) (*gatewayv1.HTTPRoute, error) {
	return cp.Gateway.GatewayV1().HTTPRoutes(ns).Get(context.Background(), name, metav1.GetOptions{})
}

// checkRouteCondition checks the condition typ of varnishgw's status entry
// for the parent Gateway gw.
func checkRouteCondition(cp *testenv.ControlPlane, ns, name, gw, typ string, status metav1.ConditionStatus, reason string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		route, err := getRoute(ns, name, cp)
		if err != nil {
			return err
		}
		for _, p := range route.Status.Parents {
			if p.ControllerName != gwruntime.ControllerName || string(p.ParentRef.Name) != gw {
				continue
			}
			for _, c := range p.Conditions {
				if c.Type == typ {
					if c.Status != status || c.Reason != reason || c.ObservedGeneration != route.Generation {
						return fmt.Errorf("condition %s = %s/%s at generation %d (%s), want %s/%s at %d", typ, c.Status, c.Reason, c.ObservedGeneration, c.Message, status, reason, route.Generation)
					}
					return nil
				}
			}
		}
		return fmt.Errorf("no %s condition for parent %s in status %+v", typ, gw, route.Status.Parents)
	}
}

// fragment reads the stored RoutingFragment of route ns/name for Gateway
// ns/gw.
func fragment(cp *testenv.ControlPlane, ns, gw, name string) (*unstructured.Unstructured, *routing.Fragment, error) {
	return fragmentOf(cp, object.Ref{Namespace: ns, Name: gw}, object.Ref{Namespace: ns, Name: name})
}

// routingKnown fails when the planned routing attribute is unknown or does
// not contain want.
type routingKnown struct {
	addr, want string
}

// onlyError matches the CLI's output of exactly one error, whose source
// snippet is the configuration line line (a regular expression) and whose
// detail matches want (the CLI wraps the detail: a space in want matches
// any white space).
func onlyError(line, want string) *regexp.Regexp {
	return regexp.MustCompile(`(?s)^` + noError + `Error: [^\n]*\n` + noError + `\n\s*\d+: +` + line + `\n` + noError +
		strings.ReplaceAll(want, " ", `\s+`) + noError + `$`)
}

// wrapped compiles pattern with each space matching any white space, as
// Terraform wraps the lines of a diagnostic.
func wrapped(pattern string) *regexp.Regexp {
	return regexp.MustCompile(strings.ReplaceAll(pattern, " ", `\s+`))
}

// experimentalControlPlane starts a control plane of its own with the
// Gateway API experimental channel's CRDs for the tests of a rule's retry
// and session persistence: the shared control plane has the standard
// channel's, whose API server drops them. It is stopped when the test ends.
func experimentalControlPlane(t *testing.T) *testenv.ControlPlane {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: set TF_ACC=1 (make test and make testacc do)")
	}
	if testing.Short() {
		t.Skip("starts an experimental channel control plane; skipped with -short")
	}
	cp, err := testenv.Start(context.Background(), testenv.Options{ExperimentalChannel: true})
	if err != nil {
		t.Fatalf("start an experimental channel control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop the experimental channel control plane: %v", err)
		}
	})
	return cp
}

// teamListenerSetHCL is the ListenerSet "team" of namespace ns, attached
// to varnishgw_gateway.test, with the listener blocks listeners.
func teamListenerSetHCL(ns string, listeners ...string) string {
	return fmt.Sprintf(`
resource "varnishgw_listener_set" "team" {
  namespace        = %q
  name             = "team"
  wait_for_rollout = false
  parent_ref {
    namespace = varnishgw_gateway.test.namespace
    name      = varnishgw_gateway.test.name
  }
%s}
`, ns, strings.Join(listeners, ""))
}

// setHTTPSListenerHCL is a ListenerSet's HTTPS listener block on port 8443
// for hostname, with the certificate Secret secret of namespace secretNS
// ("": the ListenerSet's).
func setHTTPSListenerHCL(name, hostname, secret, secretNS string) string {
	ref := fmt.Sprintf("        name = %q\n", secret)
	if secretNS != "" {
		ref += fmt.Sprintf("        namespace = %q\n", secretNS)
	}
	return fmt.Sprintf(`  listener {
    name     = %q
    port     = 8443
    protocol = "HTTPS"
    hostname = %q
    tls {
      certificate_ref {
%s      }
    }
  }
`, name, hostname, ref)
}

// protoV6ProviderFactories serve the provider in-process to the real
// terraform or tofu CLI that terraform-plugin-testing runs.
var protoV6ProviderFactories = map[string]func() (tfprotov6.ProviderServer, error){
	"varnishgw": providerserver.NewProtocol6WithError(New("test")()),
}

// accPreCheck returns the test control plane, or skips without TF_ACC.
func accPreCheck(t *testing.T) *testenv.ControlPlane {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: set TF_ACC=1 (make test and make testacc do)")
	}
	return testenv.Get(t)
}

// providerBlock configures the provider for the test control plane's admin.
func providerBlock(cp *testenv.ControlPlane) string {
	return fmt.Sprintf("provider \"varnishgw\" {\n  config_path = %q\n}\n", cp.Kubeconfig)
}

// typedDeployment is s.Deployment() as the typed object it describes.
func typedDeployment(t *testing.T, s *gwruntime.Spec) *appsv1.Deployment {
	t.Helper()
	b, err := json.Marshal(s.Deployment())
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := json.Unmarshal(b, d); err != nil {
		t.Fatal(err)
	}
	return d
}

// fullPodSpec is testSpec with every pod setting and infrastructure
// labels and annotations.
func fullPodSpec() *gwruntime.Spec {
	s := testSpec()
	s.ClassName = "varnish"
	s.Class.PullPolicy = "Always"
	aff, err := decodeAffinity(`{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/arch","operator":"In","values":["amd64"]}]}]}}}`)
	if err != nil {
		panic(err)
	}
	s.Pod = gwruntime.PodSettings{
		ImagePullSecrets: []string{"registry"},
		NodeSelector:     map[string]string{"pool": "edge"},
		Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "edge", Effect: corev1.TaintEffectNoSchedule},
			{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)}},
		Affinity:          aff,
		TopologySpread:    []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule, MinDomains: ptr.To[int32](2)}},
		PriorityClassName: "edge-critical",
		Labels:            map[string]string{"team": "platform"},
		Annotations:       map[string]string{"prometheus.io/scrape": "true"},
	}
	s.Infra = gwruntime.InfraSettings{Labels: map[string]string{"cost-center": "42"}, Annotations: map[string]string{"example.com/owner": "edge"}}
	return s
}

// hasLabels reports whether o carries every label given.
func hasLabels(o metav1.Object, labels map[string]string) bool {
	for k, v := range labels {
		if got, ok := o.GetLabels()[k]; !ok || got != v {
			return false
		}
	}
	return true
}
