package control

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// rolloutFixture is a Deployment with a current ReplicaSet (hash "new",
// the Deployment's template) and an old one (hash "old", another image),
// as the Deployment controller leaves them during a rollout.
func rolloutFixture() (*appsv1.Deployment, []appsv1.ReplicaSet) {
	tpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "gw"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "chaperone", Image: "img:2"}}},
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "edge", Name: "varnishgw-public", UID: "d-uid", Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Template: tpl},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 2},
	}
	rs := func(name, hash, image string, created time.Time, owner types.UID) appsv1.ReplicaSet {
		t := *tpl.DeepCopy()
		t.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
		t.Spec.Containers[0].Image = image
		return appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "edge", Name: name, UID: types.UID(name + "-uid"),
				Labels:            map[string]string{"app": "gw", appsv1.DefaultDeploymentUniqueLabelKey: hash},
				CreationTimestamp: metav1.NewTime(created),
				OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: owner, Controller: ptr.To(true)}}},
			Spec: appsv1.ReplicaSetSpec{Template: t},
		}
	}
	now := time.Now()
	return d, []appsv1.ReplicaSet{
		rs("old", "old", "img:1", now.Add(-time.Hour), d.UID),
		rs("new", "new", "img:2", now, d.UID),
		rs("foreign", "new2", "img:2", now.Add(-2*time.Hour), "someone-else"),
	}
}

func waiting(reason, msg string) corev1.ContainerStatus {
	return corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}
}

func TestCurrentReplicaSet(t *testing.T) {
	d, rss := rolloutFixture()
	if got := currentReplicaSet(d, rss); got == nil || got.Name != "new" {
		t.Fatalf("currentReplicaSet = %v, want new (the Deployment's template; foreign has it too but is not controlled by the Deployment)", got)
	}
	// A template the controller has not made a ReplicaSet for yet.
	d.Spec.Template.Spec.Containers[0].Image = "img:3"
	if got := currentReplicaSet(d, rss); got != nil {
		t.Errorf("currentReplicaSet after a template change = %s, want none yet", got.Name)
	}
}

func TestRolloutProblems(t *testing.T) {
	d, rss := rolloutFixture()
	oldRS, newRS := &rss[0], &rss[1]
	running := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, Ready: true}
	crashed := corev1.ContainerStatus{
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 20s restarting failed container"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, Message: "varnishd: cannot open socket"}},
	}
	for _, tc := range []struct {
		name string
		dep  func(*appsv1.Deployment)
		pods []corev1.Pod
		want []string // String() of each problem, "!" suffix when final
	}{
		{"running pods", nil, []corev1.Pod{pod(newRS, "a", running)}, nil},
		{"image pull back-off",
			nil, []corev1.Pod{pod(newRS, "a", waiting("ImagePullBackOff", `Back-off pulling image "img:2": not found`))},
			[]string{`pod edge/a, container chaperone, image "img:2": ImagePullBackOff: Back-off pulling image "img:2": not found`}},
		{"image never pulled: final",
			nil, []corev1.Pod{pod(newRS, "a", waiting("ErrImageNeverPull", `Container image "img:2" is not present with pull policy of Never`))},
			[]string{`pod edge/a, container chaperone, image "img:2": ErrImageNeverPull: Container image "img:2" is not present with pull policy of Never!`}},
		{"invalid image name: final", nil, []corev1.Pod{pod(newRS, "a", waiting("InvalidImageName", "bad"))},
			[]string{`pod edge/a, container chaperone, image "img:2": InvalidImageName: bad!`}},
		{"config error", nil, []corev1.Pod{pod(newRS, "a", waiting("CreateContainerConfigError", `secret "x" not found`))},
			[]string{`pod edge/a, container chaperone, image "img:2": CreateContainerConfigError: secret "x" not found`}},
		{"still creating", nil, []corev1.Pod{pod(newRS, "a", waiting("ContainerCreating", ""))}, nil},
		{"first crash waits", nil, []corev1.Pod{pod(newRS, "a", func() corev1.ContainerStatus { c := crashed; c.RestartCount = 1; return c }())},
			[]string{`pod edge/a, container chaperone, image "img:2": CrashLoopBackOff: last exit: Error, exit code 1 (varnishd: cannot open socket); back-off 20s restarting failed container`}},
		{"second crash: final", nil, []corev1.Pod{pod(newRS, "a", func() corev1.ContainerStatus { c := crashed; c.RestartCount = 2; return c }())},
			[]string{`pod edge/a, container chaperone, image "img:2": CrashLoopBackOff: last exit: Error, exit code 1 (varnishd: cannot open socket); back-off 20s restarting failed container!`}},
		{"restarts while running", nil, []corev1.Pod{pod(newRS, "a", corev1.ContainerStatus{
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, RestartCount: 3,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}})},
			[]string{`pod edge/a, container chaperone, image "img:2": restarted 3 times: last exit: OOMKilled, exit code 137!`}},
		{"restarted but ready again", nil, []corev1.Pod{pod(newRS, "a", func() corev1.ContainerStatus { c := running; c.RestartCount = 5; return c }())}, nil},
		{"old template's pods do not count", nil, []corev1.Pod{pod(oldRS, "old-a", waiting("CrashLoopBackOff", "x")), pod(newRS, "a", running)}, nil},
		{"a pod with the hash but another owner does not count", nil, func() []corev1.Pod {
			p := pod(newRS, "stray", waiting("ImagePullBackOff", "x"))
			p.OwnerReferences = nil
			return []corev1.Pod{p}
		}(), nil},
		{"terminating pods do not count", nil, func() []corev1.Pod {
			p := pod(newRS, "a", waiting("ImagePullBackOff", "x"))
			p.DeletionTimestamp = ptr.To(metav1.Now())
			return []corev1.Pod{p}
		}(), nil},
		{"progress deadline: final", func(d *appsv1.Deployment) {
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
				Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "new" has timed out progressing.`}}
		}, nil, []string{`ProgressDeadlineExceeded: ReplicaSet "new" has timed out progressing.!`}},
		{"a stale condition of the previous spec does not count", func(d *appsv1.Deployment) {
			d.Status.ObservedGeneration = 1
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
		}, nil, nil},
		{"replica failure", func(d *appsv1.Deployment) {
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue,
				Reason: "FailedCreate", Message: `pods "new-x" is forbidden: violates PodSecurity "restricted:latest"`}}
		}, nil, []string{`ReplicaFailure FailedCreate: pods "new-x" is forbidden: violates PodSecurity "restricted:latest"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := d.DeepCopy()
			if tc.dep != nil {
				tc.dep(d)
			}
			var got []string
			for _, p := range rolloutProblems(d, currentReplicaSet(d, rss), tc.pods) {
				s := p.String()
				if p.Final {
					s += "!"
				}
				got = append(got, s)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestFailureTracker(t *testing.T) {
	start := time.Now()
	pull := rolloutProblem{Pod: "edge/a", Container: "chaperone", Reason: "ErrImagePull"}
	backOff := pull
	backOff.Reason = "ImagePullBackOff"
	var tr failureTracker
	if p := tr.observe(start, []rolloutProblem{pull}); p != nil {
		t.Fatalf("a new pull error failed the wait at once: %v", p)
	}
	// The kubelet alternates ErrImagePull and ImagePullBackOff: one failure.
	if p := tr.observe(start.Add(failFastAfter/2), []rolloutProblem{backOff}); p != nil {
		t.Fatalf("failed after %s: %v", failFastAfter/2, p)
	}
	if p := tr.observe(start.Add(failFastAfter), []rolloutProblem{pull}); p == nil || p.Reason != "ErrImagePull" {
		t.Fatalf("after %s of pull errors: %v, want a failure", failFastAfter, p)
	}
	// A container that recovers is forgotten: its next failure starts over.
	tr = failureTracker{}
	tr.observe(start, []rolloutProblem{pull})
	tr.observe(start.Add(time.Second), nil)
	if p := tr.observe(start.Add(failFastAfter), []rolloutProblem{pull}); p != nil {
		t.Errorf("a failure after a recovery counted from the first one: %v", p)
	}
	// A final problem fails at once.
	final := rolloutProblem{Pod: "edge/b", Container: "chaperone", Reason: "InvalidImageName", Final: true}
	if p := tr.observe(start.Add(failFastAfter), []rolloutProblem{pull, final}); p == nil || p.Reason != "InvalidImageName" {
		t.Errorf("final problem: %v, want it", p)
	}
}

// TestRolloutErrorText fixes the error text, which the end-to-end tests on
// a real node match: "the Deployment NS/NAME cannot roll out: pod NS/POD,
// container NAME, image "IMAGE": REASON: MESSAGE."
func TestRolloutErrorText(t *testing.T) {
	err := &RolloutError{Deployment: "edge/varnishgw-public", Problem: rolloutProblem{
		Pod: "edge/varnishgw-public-5f7d9-x2x", Container: "chaperone", Image: "localhost/varnishgw/gateway:nope",
		Reason: "ImagePullBackOff", Message: `Back-off pulling image "localhost/varnishgw/gateway:nope"`}}
	want := `the Deployment edge/varnishgw-public cannot roll out: pod edge/varnishgw-public-5f7d9-x2x, container chaperone, ` +
		`image "localhost/varnishgw/gateway:nope": ImagePullBackOff: Back-off pulling image "localhost/varnishgw/gateway:nope".` + "\n" +
		`Check that the class's image exists and that the nodes can pull it`
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error:\n%s\nwant it to start with:\n%s", err, want)
	}
	crash := &RolloutError{Deployment: "edge/varnishgw-public", Problem: rolloutProblem{Pod: "edge/p", Container: "varnish", Reason: "CrashLoopBackOff"}}
	if !strings.Contains(crash.Error(), "kubectl -n edge logs p -c varnish --previous") {
		t.Errorf("crash error lacks the logs command: %s", crash)
	}
}

// pod is a pod of rs whose chaperone container has status st.
func pod(rs *appsv1.ReplicaSet, name string, st corev1.ContainerStatus) corev1.Pod {
	st.Name = "chaperone"
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: name,
			Labels:          map[string]string{"app": "gw", appsv1.DefaultDeploymentUniqueLabelKey: rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
		Spec:   rs.Spec.Template.Spec,
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{st}},
	}
}
