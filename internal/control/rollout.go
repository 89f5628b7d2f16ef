package control

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
)

// How the rollout wait tells a rollout that cannot finish from a slow one.
const (
	// rolloutPollEvery is how often the rollout wait reads the Deployment.
	rolloutPollEvery = time.Second
	// failFastAfter is how long a pod of the current template may stay in
	// a failing state (an image pull or container start failure) before
	// the wait fails; the kubelet retries, and a passing registry hiccup
	// must not fail an apply.
	failFastAfter = 20 * time.Second
	// maxRestarts of a container of the current template fail the wait.
	maxRestarts = 3
)

// failingReasons are the kubelet's waiting reasons of a container that
// cannot pull its image or start, with whether waiting cannot help: the
// kubelet does not retry an image name it cannot parse, nor pull an image
// with pull policy Never.
var failingReasons = map[string]bool{
	"ErrImagePull":               false,
	"ImagePullBackOff":           false,
	"ImageInspectError":          false,
	"InvalidImageName":           true,
	"ErrImageNeverPull":          true,
	"CreateContainerConfigError": false,
	"CreateContainerError":       false,
	"RunContainerError":          false,
	"PreStartHookError":          false,
	"PostStartHookError":         false,
	"CrashLoopBackOff":           false,
}

// rolloutProblem is why a pod of the Deployment's current template (or the
// Deployment itself, with Pod empty) does not become available.
type rolloutProblem struct {
	Pod, Container, Image string
	Reason, Message       string
	// Final problems fail the wait at once; others once they have lasted
	// failFastAfter.
	Final bool
}

// String is the problem as the wait's error shows it:
//
//	pod NS/NAME, container NAME, image "IMAGE": REASON: MESSAGE
//
// or, for the Deployment: Deployment NS/NAME: REASON: MESSAGE.
func (p rolloutProblem) String() string {
	var b strings.Builder
	if p.Pod != "" {
		fmt.Fprintf(&b, "pod %s, container %s, image %q: %s", p.Pod, p.Container, p.Image, p.Reason)
	} else {
		fmt.Fprintf(&b, "%s", p.Reason)
	}
	if p.Message != "" {
		b.WriteString(": " + p.Message)
	}
	return b.String()
}

func (p rolloutProblem) key() string { return p.Pod + "\x00" + p.Container }

// currentReplicaSet is the ReplicaSet of d's current pod template, as the
// Deployment controller finds it: controlled by d, with d's template once
// the pod-template-hash label is set aside. Nil while the controller has
// not created it yet.
func currentReplicaSet(d *appsv1.Deployment, rss []appsv1.ReplicaSet) *appsv1.ReplicaSet {
	var found *appsv1.ReplicaSet
	for i := range rss {
		rs := &rss[i]
		if !metav1.IsControlledBy(rs, d) || !equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			continue
		}
		// Two of them only after a hash collision: the controller uses the
		// oldest.
		if found == nil || rs.CreationTimestamp.Before(&found.CreationTimestamp) {
			found = rs
		}
	}
	return found
}

// equalIgnoreHash compares two pod templates without the pod-template-hash
// label.
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return equality.Semantic.DeepEqual(a, b)
}

// rolloutProblems are the reasons d's rollout does not finish that the
// wait acts on: the Deployment's own conditions once it has observed its
// spec, and the failing containers of the pods of rs, its current
// ReplicaSet. Pods of other templates do not count: their problems are
// those of the previous rollout.
func rolloutProblems(d *appsv1.Deployment, rs *appsv1.ReplicaSet, pods []corev1.Pod) []rolloutProblem {
	var out []rolloutProblem
	if d.Status.ObservedGeneration >= d.Generation {
		for _, c := range d.Status.Conditions {
			switch {
			case c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded":
				out = append(out, rolloutProblem{Reason: "ProgressDeadlineExceeded", Message: c.Message, Final: true})
			case c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue:
				out = append(out, rolloutProblem{Reason: "ReplicaFailure " + c.Reason, Message: c.Message})
			}
		}
	}
	if rs == nil {
		return out
	}
	hash := rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	for i := range pods {
		pod := &pods[i]
		if pod.DeletionTimestamp != nil || !metav1.IsControlledBy(pod, rs) || pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash {
			continue
		}
		images := map[string]string{}
		for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
			images[c.Name] = c.Image
		}
		for _, st := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
			p := rolloutProblem{Pod: pod.Namespace + "/" + pod.Name, Container: st.Name, Image: images[st.Name]}
			if p.Image == "" {
				p.Image = st.Image
			}
			w := st.State.Waiting
			var final, failing bool
			if w != nil {
				final, failing = failingReasons[w.Reason]
			}
			switch {
			case failing && w.Reason == "CrashLoopBackOff":
				// Two crashes in a row are no accident.
				p.Reason, p.Message, p.Final = w.Reason, lastExit(st)+w.Message, st.RestartCount >= 2
			case failing:
				p.Reason, p.Message, p.Final = w.Reason, w.Message, final
			case st.RestartCount >= maxRestarts && !st.Ready:
				p.Reason, p.Message, p.Final = fmt.Sprintf("restarted %d times", st.RestartCount), strings.TrimSuffix(lastExit(st), "; "), true
			default:
				continue
			}
			out = append(out, p)
		}
	}
	return out
}

// lastExit describes how a container last ended, "" if it never did.
func lastExit(st corev1.ContainerStatus) string {
	t := st.LastTerminationState.Terminated
	if t == nil {
		return ""
	}
	s := fmt.Sprintf("last exit: %s, exit code %d", t.Reason, t.ExitCode)
	if msg := strings.TrimSpace(t.Message); msg != "" {
		s += " (" + msg + ")"
	}
	return s + "; "
}

// pendingPods describes the current template's pods that are not
// scheduled, for the timeout error: a wrong node selector or missing
// capacity shows there, and may be fixed by the cluster, so it does not
// fail the wait.
func pendingPods(rs *appsv1.ReplicaSet, pods []corev1.Pod) string {
	if rs == nil {
		return ""
	}
	var out []string
	for _, pod := range pods {
		if !metav1.IsControlledBy(&pod, rs) {
			continue
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				out = append(out, fmt.Sprintf("pod %s/%s is not scheduled: %s: %s", pod.Namespace, pod.Name, c.Reason, c.Message))
			}
		}
	}
	return strings.Join(out, "; ")
}

// failureTracker remembers since when each container has been failing.
type failureTracker struct{ since map[string]time.Time }

// observe records the problems seen at now and returns the one that fails
// the wait: the first final one, else the first that has lasted
// failFastAfter. A container that stops failing is forgotten.
func (t *failureTracker) observe(now time.Time, problems []rolloutProblem) *rolloutProblem {
	if t.since == nil {
		t.since = map[string]time.Time{}
	}
	seen := map[string]bool{}
	var lasting *rolloutProblem
	for i, p := range problems {
		if p.Final {
			return &problems[i]
		}
		k := p.key()
		seen[k] = true
		since, ok := t.since[k]
		if !ok {
			t.since[k] = now
			since = now
		}
		if lasting == nil && now.Sub(since) >= failFastAfter {
			lasting = &problems[i]
		}
	}
	for k := range t.since {
		if !seen[k] {
			delete(t.since, k)
		}
	}
	return lasting
}

// RolloutError is the error of a rollout wait that failed fast: the first
// problem found, for the pod, container and image it names. Its text
// starts "the Deployment NS/NAME cannot roll out: " and then has the
// problem's String.
type RolloutError struct {
	Deployment string
	Problem    rolloutProblem
}

func (e *RolloutError) Error() string {
	ns, name, _ := strings.Cut(e.Deployment, "/")
	p := e.Problem
	var hint string
	switch {
	case p.Pod == "":
		hint = fmt.Sprintf("See kubectl -n %s describe deployment %s, and its newest ReplicaSet.", ns, name)
	case strings.Contains(p.Reason, "Image"):
		hint = "Check that the class's image exists and that the nodes can pull it: push it to a registry the cluster " +
			"pulls from (with pod.image_pull_secrets when the registry needs credentials), or import it into the " +
			"container runtime of every node and keep image_pull_policy = \"IfNotPresent\" (or \"Never\")."
	case p.Reason == "CrashLoopBackOff" || strings.HasPrefix(p.Reason, "restarted"):
		_, pod, _ := strings.Cut(p.Pod, "/")
		hint = fmt.Sprintf("The container keeps exiting; its log says why: kubectl -n %s logs %s -c %s --previous.", ns, pod, p.Container)
	default:
		_, pod, _ := strings.Cut(p.Pod, "/")
		hint = fmt.Sprintf("The kubelet could not create or start the container: kubectl -n %s describe pod %s.", ns, pod)
	}
	return fmt.Sprintf("the Deployment %s cannot roll out: %s.\n%s The pods of the previous template, if any, keep serving. "+
		"Fix the cause and apply again, or set wait_for_rollout = false.", e.Deployment, p, hint)
}

// WaitRollout polls the gateway's Deployment until it has rolled out. It
// fails at once when the pods of the current template cannot pull their
// image or start (see rolloutProblems and failureTracker), and when
// timeout passes.
func (c *Cluster) WaitRollout(ctx context.Context, gw object.Ref, timeout time.Duration) error {
	ns, name := gw.Namespace, gwruntime.Name(gw)
	last := "not read yet"
	var tracker failureTracker
	var failed *rolloutProblem
	errFailed := errors.New("rollout failed")
	err := wait.PollUntilContextTimeout(ctx, rolloutPollEvery, timeout, true, func(ctx context.Context) (bool, error) {
		d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, fmt.Errorf("the Deployment %s/%s was deleted while apply waited for its rollout; apply again to recreate it", ns, name)
		}
		if err != nil {
			if ctx.Err() == nil { // not cut short by the timeout
				last = err.Error()
			}
			return false, nil
		}
		done, why := RolledOut(d)
		if done {
			return true, nil
		}
		last = why
		rs, pods, err := c.currentPods(ctx, d)
		if err != nil {
			if ctx.Err() == nil {
				last += "; " + err.Error()
			}
			return false, nil
		}
		if p := tracker.observe(time.Now(), rolloutProblems(d, rs, pods)); p != nil {
			failed = p
			return false, errFailed
		}
		if s := pendingPods(rs, pods); s != "" {
			last += "; " + s
		}
		return false, nil
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errFailed):
		return &RolloutError{Deployment: ns + "/" + name, Problem: *failed}
	case ctx.Err() != nil:
		return fmt.Errorf("the wait for the rollout of the Deployment %s/%s was interrupted: %s", ns, name, last)
	case wait.Interrupted(err):
		return fmt.Errorf("the Deployment %s/%s did not roll out within rollout_timeout (%s): %s.\n"+
			"Check its pods (kubectl -n %s describe deployment %s), raise rollout_timeout, or set wait_for_rollout = false",
			ns, name, timeout, last, ns, name)
	}
	return err
}

// currentPods lists the ReplicaSets of the gateway's Deployment d and the
// pods of the current one (nil, nil while there is none).
func (c *Cluster) currentPods(ctx context.Context, d *appsv1.Deployment) (*appsv1.ReplicaSet, []corev1.Pod, error) {
	sel := d.Spec.Selector.MatchLabels
	rss, err := c.Kube.AppsV1().ReplicaSets(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		return nil, nil, fmt.Errorf("list the ReplicaSets of Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	rs := currentReplicaSet(d, rss.Items)
	if rs == nil {
		return nil, nil, nil
	}
	podSel := maps.Clone(sel)
	podSel[appsv1.DefaultDeploymentUniqueLabelKey] = rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	pods, err := c.Kube.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(podSel).String()})
	if err != nil {
		return nil, nil, fmt.Errorf("list the pods of ReplicaSet %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	return rs, pods.Items, nil
}

// RolledOut reports whether d has rolled out its current template, as
// kubectl rollout status decides it.
func RolledOut(d *appsv1.Deployment) (bool, string) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return false, "the Deployment controller has not observed the latest spec"
	case st.UpdatedReplicas < want:
		return false, fmt.Sprintf("%d of %d replicas updated", st.UpdatedReplicas, want)
	case st.Replicas > st.UpdatedReplicas:
		return false, fmt.Sprintf("%d old replicas pending termination", st.Replicas-st.UpdatedReplicas)
	case st.AvailableReplicas < st.UpdatedReplicas:
		return false, fmt.Sprintf("%d of %d updated replicas available", st.AvailableReplicas, st.UpdatedReplicas)
	}
	return true, ""
}
