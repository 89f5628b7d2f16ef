package gwruntime

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1apply "k8s.io/client-go/applyconfigurations/policy/v1"
	rbacv1apply "k8s.io/client-go/applyconfigurations/rbac/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// The runtime objects of a gateway beside its Deployment, as the provider
// applies them (the namespaced ones also get the Gateway as their owner).

// ServiceAccount is the pods' ServiceAccount.
func (s *Spec) ServiceAccount() *corev1apply.ServiceAccountApplyConfiguration {
	return corev1apply.ServiceAccount(s.Name(), s.Gateway.Namespace).WithLabels(s.ObjectLabels()).WithAnnotations(s.ObjectAnnotations()).
		WithAutomountServiceAccountToken(true)
}

// Role is the pods' Role in the Gateway's namespace (GatewayRules).
func (s *Spec) Role() *rbacv1apply.RoleApplyConfiguration {
	return rbacv1apply.Role(s.Name(), s.Gateway.Namespace).WithLabels(s.ObjectLabels()).WithAnnotations(s.ObjectAnnotations()).
		WithRules(PolicyRulesApply(s.GatewayRules())...)
}

// RoleBinding binds Role to the pods' ServiceAccount.
func (s *Spec) RoleBinding() *rbacv1apply.RoleBindingApplyConfiguration {
	name, ns := s.Name(), s.Gateway.Namespace
	return rbacv1apply.RoleBinding(name, ns).WithLabels(s.ObjectLabels()).WithAnnotations(s.ObjectAnnotations()).
		WithRoleRef(rbacv1apply.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(name)).
		WithSubjects(rbacv1apply.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(name).WithNamespace(ns))
}

// BackendClusterRole is the ClusterRole that the routes' backend
// RoleBindings bind (BackendRules).
func (s *Spec) BackendClusterRole() *rbacv1apply.ClusterRoleApplyConfiguration {
	return rbacv1apply.ClusterRole(BackendClusterRoleName(s.Gateway)).WithLabels(s.ObjectLabels()).WithAnnotations(s.ObjectAnnotations()).
		WithRules(PolicyRulesApply(BackendRules())...)
}

// NamespaceRole is a Role name in namespace ns with rules that lets the
// pods do something there (read certificate Secrets, patch the status of
// ListenerSets), and its RoleBinding to their ServiceAccount. Neither has
// an owner: a namespaced object cannot be owned by an object of another
// namespace, so they carry the runtime labels, by which they are found.
func (s *Spec) NamespaceRole(ns, name string, rules []rbacv1.PolicyRule) (*rbacv1apply.RoleApplyConfiguration, *rbacv1apply.RoleBindingApplyConfiguration) {
	lbl, ann := s.ObjectLabels(), s.ObjectAnnotations()
	role := rbacv1apply.Role(name, ns).WithLabels(lbl).WithAnnotations(ann).WithRules(PolicyRulesApply(rules)...)
	rb := rbacv1apply.RoleBinding(name, ns).WithLabels(lbl).WithAnnotations(ann).
		WithRoleRef(rbacv1apply.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(name)).
		WithSubjects(rbacv1apply.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(s.Name()).WithNamespace(s.Gateway.Namespace))
	return role, rb
}

// VCLConfigMap is the ConfigMap VCLConfigMapName: main.vcl, the boot VCL
// of sidecar mode and the Gateway's own VCL (GatewayVCLKey), if any.
func (s *Spec) VCLConfigMap() *corev1apply.ConfigMapApplyConfiguration {
	data := map[string]string{VCLDataKey: s.MainVCL(), BootVCLKey: s.BootVCL}
	if s.GatewayVCL != nil {
		data[GatewayVCLKey] = *s.GatewayVCL
	}
	return corev1apply.ConfigMap(VCLConfigMapName(s.Gateway), s.Gateway.Namespace).WithLabels(s.ObjectLabels()).WithAnnotations(s.ObjectAnnotations()).
		WithData(data)
}

// Service is the gateway's Service: a port per listener port, selecting
// the pods, with the service annotations.
func (s *Spec) Service() *corev1apply.ServiceApplyConfiguration {
	svc := corev1apply.ServiceSpec().WithType(s.ServiceType).WithSelector(Labels(s.Gateway))
	if s.ExternalTrafficPolicy != "" {
		svc.WithExternalTrafficPolicy(s.ExternalTrafficPolicy)
	}
	for _, p := range s.Ports {
		svc.WithPorts(corev1apply.ServicePort().WithName(ghostjson.SocketName(p)).
			WithProtocol(corev1.ProtocolTCP).WithPort(p).WithTargetPort(intstr.FromInt32(p)))
	}
	return corev1apply.Service(s.Name(), s.Gateway.Namespace).WithLabels(s.ObjectLabels()).WithAnnotations(s.ObjectAnnotations()).
		WithAnnotations(s.ServiceAnnotations).WithSpec(svc)
}

// PodDisruptionBudget is the pods' PodDisruptionBudget.
func (s *Spec) PodDisruptionBudget() *policyv1apply.PodDisruptionBudgetApplyConfiguration {
	return policyv1apply.PodDisruptionBudget(s.Name(), s.Gateway.Namespace).WithLabels(s.ObjectLabels()).WithAnnotations(s.ObjectAnnotations()).
		WithSpec(policyv1apply.PodDisruptionBudgetSpec().
			WithMaxUnavailable(s.MaxUnavailable).
			WithSelector(metav1apply.LabelSelector().WithMatchLabels(Labels(s.Gateway))))
}

// PolicyRulesApply are the apply configurations of rules.
func PolicyRulesApply(rules []rbacv1.PolicyRule) []*rbacv1apply.PolicyRuleApplyConfiguration {
	out := make([]*rbacv1apply.PolicyRuleApplyConfiguration, len(rules))
	for i, r := range rules {
		out[i] = rbacv1apply.PolicyRule().WithAPIGroups(r.APIGroups...).WithResources(r.Resources...).WithVerbs(r.Verbs...)
		if len(r.ResourceNames) > 0 {
			out[i].WithResourceNames(r.ResourceNames...)
		}
	}
	return out
}
