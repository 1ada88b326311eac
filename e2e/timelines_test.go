package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// apiSource reads an exporter's timeline API: /api/v1/timelines and the
// one-object endpoint, as an episodeSource.
// episodeSource reads episodes whole, as the tests compare them.
type episodeSource interface {
	List(q timeline.Query, now time.Time) []timeline.Episode
	Object(kind, namespace, name string, now time.Time) []timeline.Episode
}

type apiSource struct {
	t *testing.T
	e *exporterProc
}

func (a apiSource) get(path string) []timeline.Episode {
	a.t.Helper()
	code, body, err := a.e.get(path)
	if err != nil || code != http.StatusOK {
		a.t.Fatalf("GET %s: %d %v\n%s", path, code, err, body)
	}
	var out struct {
		Items []timeline.Episode `json:"items"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		a.t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
	return out.Items
}

func (a apiSource) List(q timeline.Query, _ time.Time) []timeline.Episode {
	v := url.Values{}
	for k, x := range map[string]string{"namespace": q.Namespace, "kind": q.Kind, "outcome": q.Outcome, "state": q.State,
		"uid": q.UID, "trace_id": q.TraceID, "sort": q.Sort} {
		if x != "" {
			v.Set(k, x)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return a.get("/api/v1/timelines?" + v.Encode())
}

func (a apiSource) Object(kind, namespace, name string, _ time.Time) []timeline.Episode {
	if namespace == "" {
		namespace = "_"
	}
	return a.get("/api/v1/timelines/" + url.PathEscape(kind) + "/" + url.PathEscape(namespace) + "/" + url.PathEscape(name))
}

// The timeline tests read the shared exporter's API (the binary built
// from this tree).

// TestTimelineQuotaBlockedRollout: a Deployment written by the field
// manager e2e-writer in a namespace whose ResourceQuota allows no pod. Its
// timeline holds the write with that manager, the ReplicaSet the
// controller created, the FailedCreate Warning Events the ReplicaSet
// controller records about it (resolved through the ReplicaSet to the
// Deployment's episode), and what blocks it: stage updated, reason
// replica_failure, before the stall threshold. A second write keeps both
// generations, the first superseded; ?uid= and ?trace_id= find them.
func TestTimelineQuotaBlockedRollout(t *testing.T) {
	ctx := context.Background()
	ns := "timeline-quota"
	exp := shared.forTest(t)
	var store episodeSource = apiSource{t, exp}
	quotaNamespace(t, ns)

	labels := map[string]string{"app": "tl"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}}}}}
	d, err := client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{FieldManager: "e2e-writer"})
	if err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	uid := string(d.UID)

	var ep timeline.Episode
	eventually(t, 60*time.Second, "the episode blocked on replica_failure with FailedCreate events", func() (bool, string) {
		eps := store.List(timeline.Query{Namespace: ns}, time.Now())
		if len(eps) != 1 {
			return false, fmt.Sprintf("%d episodes", len(eps))
		}
		ep = eps[0]
		return ep.Reason == "replica_failure" && countEvents(ep, "FailedCreate") >= 2,
			fmt.Sprintf("stage %s reason %s, %d FailedCreate entries, entries %v", ep.Stage, ep.Reason, countEvents(ep, "FailedCreate"), entryTypes(ep))
	})
	t.Logf("blocked %.1f s after the write: stage %s, reason %s, %d entries: %v", time.Since(written).Seconds(), ep.Stage, ep.Reason, len(ep.Entries), entryTypes(ep))
	if ep.Kind != "Deployment" || ep.Name != "web" || ep.UID != uid || ep.Generation != 1 || ep.Change != "create" || ep.State != timeline.StateInProgress || ep.Stage != "updated" {
		t.Errorf("episode = %s %s/%s uid %s gen %d change %s state %s stage %s, want Deployment %s/web uid %s gen 1 create in_progress held at updated",
			ep.Kind, ep.Namespace, ep.Name, ep.UID, ep.Generation, ep.Change, ep.State, ep.Stage, ns, uid)
	}
	if ep.TraceID != timeline.TraceID(uid, 1) {
		t.Errorf("traceId %s, want TraceID(uid, 1) = %s", ep.TraceID, timeline.TraceID(uid, 1))
	}
	write := firstOf(ep, timeline.EntryWrite)
	switch {
	case write == nil:
		t.Error("no write entry")
	case write.Generation != 1 || !slices.Contains(write.Managers, "e2e-writer") || write.APITime == nil:
		t.Errorf("write entry = gen %d managers %v apiTime %v, want gen 1 by e2e-writer with its API time", write.Generation, write.Managers, write.APITime)
	case write.APITime.Sub(write.Time).Abs() > 2*time.Second:
		t.Errorf("write received %v, API time %v: the two clocks differ by more than 2 s", write.Time, *write.APITime)
	}
	var rs *timeline.Entry
	for i, e := range ep.Entries {
		if e.Type == timeline.EntryObject && e.Object != nil && e.Object.Kind == "ReplicaSet" && e.Reason == "created" {
			rs = &ep.Entries[i]
		}
	}
	if rs == nil {
		t.Errorf("no ReplicaSet created entry: %v", entryTypes(ep))
	}
	for _, e := range ep.Entries {
		if e.Type != timeline.EntryEvent || e.Reason != "FailedCreate" {
			continue
		}
		if e.Object == nil || e.Object.Kind != "ReplicaSet" || (rs != nil && e.Object.UID != rs.Object.UID) ||
			e.Controller != "replicaset-controller" || e.Count < 1 || !strings.Contains(e.Message, "exceeded quota") || e.APITime == nil {
			t.Errorf("FailedCreate entry = %+v (object %+v), want about the ReplicaSet, by replicaset-controller, counted, its note, its API time", e, e.Object)
			break
		}
	}
	if b := lastOf(ep, timeline.EntryBlocking); b == nil || b.Stage != "updated" || b.Reason != "replica_failure" {
		t.Errorf("last blocking entry = %+v, want updated/replica_failure", b)
	}

	// A second write: a new pod template, by the same manager.
	d, err = client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Image = "registry.example/app:v2"
	if _, err := client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{FieldManager: "e2e-writer"}); err != nil {
		t.Fatal(err)
	}
	var gens []timeline.Episode
	eventually(t, 30*time.Second, "both generations retained", func() (bool, string) {
		gens = store.Object("Deployment", ns, "web", time.Now())
		if len(gens) != 2 {
			return false, fmt.Sprintf("%d episodes", len(gens))
		}
		return gens[0].Generation == 2 && gens[1].Outcome == "superseded", fmt.Sprintf("gen %d %s, gen %d %s", gens[0].Generation, gens[0].State, gens[1].Generation, gens[1].Outcome)
	})
	if w := firstOf(gens[0], timeline.EntryWrite); w == nil || w.Generation != 2 || !slices.Contains(w.Managers, "e2e-writer") {
		t.Errorf("generation 2's write = %+v, want gen 2 by e2e-writer", w)
	}
	if gens[0].Change != "template" || gens[1].State != timeline.StateClosed || lastOf(gens[1], timeline.EntryClosed) == nil {
		t.Errorf("generations: %s %s, %s %s", gens[0].Change, gens[0].State, gens[1].State, gens[1].Outcome)
	}
	if byUID := store.List(timeline.Query{UID: uid, Sort: timeline.SortStart}, time.Now()); len(byUID) != 2 || byUID[0].Generation != 2 || byUID[1].Generation != 1 {
		t.Errorf("?uid= found %d episodes, want generations 2 and 1", len(byUID))
	}
	if byTrace := store.List(timeline.Query{TraceID: timeline.TraceID(uid, 2)}, time.Now()); len(byTrace) != 1 || byTrace[0].Generation != 2 {
		t.Errorf("?trace_id= found %d episodes, want generation 2", len(byTrace))
	}

	// The store's counters are served, and the timelines collector runs.
	mfs := exp.scrape()
	for _, name := range []string{"kube_convergence_timeline_entries_dropped_total", "kube_convergence_timeline_episodes_evicted_total"} {
		if _, ok := value(mfs, name, nil); !ok {
			t.Errorf("%s not served", name)
		}
	}
	if v, _ := value(mfs, "kube_convergence_collector_up", map[string]string{"collector": "timelines"}); v != 1 {
		t.Errorf("collector_up{timelines} = %v, want 1", v)
	}
}

// TestTimelineRolloutEvidence: a Deployment of two replicas behind a
// Service, with kwok's pod delays injected (Ready 1 s + 2 s after
// creation). Its closed timeline has every stage timed with the value the
// duration histogram observed, and per pod the evidence in order on the
// exporter's clock: created, scheduled on the kwok node, Ready about 3 s
// after creation on both clocks, and a ready endpoint of the Service.
// Meanwhile, another Deployment's pod cannot be scheduled
// (checkUnschedulable).
func TestTimelineRolloutEvidence(t *testing.T) {
	ctx := context.Background()
	exp := shared.forTest(t)
	var store episodeSource = apiSource{t, exp}
	ns := namespace(t, "timeline-evidence")
	unschedulable(t, namespace(t, "timeline-unsched"))
	service(t, ns, "web")
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "web", 2, demo.Delays(podCreateDelay, podReadyDelay)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ep timeline.Episode
	eventually(t, 60*time.Second, "the episode converged", func() (bool, string) {
		eps := store.List(timeline.Query{Namespace: ns}, time.Now())
		if len(eps) != 1 {
			return false, fmt.Sprintf("%d episodes", len(eps))
		}
		ep = eps[0]
		return ep.Outcome == "converged", fmt.Sprintf("state %s stage %s reason %s", ep.State, ep.Stage, ep.Reason)
	})
	t.Logf("%d entries: %v", len(ep.Entries), entryTypes(ep))

	byName := exp.scrape()
	for _, st := range ep.Stages {
		if !st.Reached || st.DurationSeconds == nil || st.At == nil {
			t.Errorf("stage %s: reached %v, duration %v", st.Stage, st.Reached, st.DurationSeconds)
			continue
		}
		sum, n := histogram(byName, "kube_convergence_rollout_duration_seconds", map[string]string{"namespace": ns, "stage": st.Stage})
		if n != 1 || sum != *st.DurationSeconds {
			t.Errorf("stage %s: timeline %v s, histogram count %d sum %v: want the one observed value", st.Stage, *st.DurationSeconds, n, sum)
		}
		if got := st.At.Sub(ep.Start).Seconds(); !within(got, *st.DurationSeconds, 1e-6) {
			t.Errorf("stage %s at start+%.6f s, duration %.6f s", st.Stage, got, *st.DurationSeconds)
		}
	}
	injected := (podCreateDelay + podReadyDelay).Seconds()
	if av := ep.Stages[2]; av.DurationSeconds == nil || *av.DurationSeconds < injected || *av.DurationSeconds > injected+1.5 {
		t.Errorf("available after %v s, want within [%.1f, %.1f] (the injected pod delays)", av.DurationSeconds, injected, injected+1.5)
	}

	type podLife struct{ created, scheduled, ready, endpoint *timeline.Entry }
	pods := map[string]*podLife{}
	for i := range ep.Entries {
		e := &ep.Entries[i]
		if e.Object == nil || e.Object.Kind != "Pod" {
			continue
		}
		p := pods[e.Object.UID]
		if p == nil {
			p = &podLife{}
			pods[e.Object.UID] = p
		}
		switch {
		case e.Type == timeline.EntryObject && e.Reason == "created":
			p.created = e
		case e.Type == timeline.EntryScheduled && e.Node != "":
			p.scheduled = e
		case e.Type == timeline.EntryReady && e.Reason == "ready":
			p.ready = e
		case e.Type == timeline.EntryEndpoint && e.Reason == "ready":
			p.endpoint = e
		}
	}
	if len(pods) != 2 {
		t.Fatalf("entries about %d pods, want 2", len(pods))
	}
	for uid, p := range pods {
		if p.created == nil || p.scheduled == nil || p.ready == nil || p.endpoint == nil {
			t.Errorf("pod %s: created %v scheduled %v ready %v endpoint %v", uid, p.created != nil, p.scheduled != nil, p.ready != nil, p.endpoint != nil)
			continue
		}
		live := p.ready.Time.Sub(p.created.Time).Seconds()
		api := p.ready.APITime.Sub(*p.created.APITime).Seconds()
		t.Logf("pod %s: scheduled +%.3f s on %s, ready +%.3f s (API clock +%.0f s), endpoint +%.3f s",
			p.created.Object.Name, p.scheduled.Time.Sub(p.created.Time).Seconds(), p.scheduled.Node, live, api, p.endpoint.Time.Sub(p.created.Time).Seconds())
		if p.scheduled.Node != "kwok-node-0" || p.endpoint.Message != "web" {
			t.Errorf("pod %s: node %q, endpoint of %q", uid, p.scheduled.Node, p.endpoint.Message)
		}
		if !within(live, injected, 0.5) || !within(api, injected, 1) {
			t.Errorf("pod %s Ready %.3f s after creation (API clock %.0f s), want %.0f s", uid, live, api, injected)
		}
		if !p.created.Time.Before(p.scheduled.Time) || p.ready.Time.Before(p.scheduled.Time) || p.endpoint.Time.Before(p.ready.Time) {
			t.Errorf("pod %s: evidence out of order", uid)
		}
	}
	checkUnschedulable(t, store, "timeline-unsched")
}

func countEvents(ep timeline.Episode, reason string) int {
	n := 0
	for _, e := range ep.Entries {
		if e.Type == timeline.EntryEvent && e.Reason == reason {
			n++
		}
	}
	return n
}

func entryTypes(ep timeline.Episode) []string {
	out := make([]string, len(ep.Entries))
	for i, e := range ep.Entries {
		out[i] = string(e.Type)
		if e.Reason != "" {
			out[i] += ":" + e.Reason
		}
	}
	return out
}

func firstOf(ep timeline.Episode, t timeline.EntryType) *timeline.Entry {
	for i := range ep.Entries {
		if ep.Entries[i].Type == t {
			return &ep.Entries[i]
		}
	}
	return nil
}

func lastOf(ep timeline.Episode, t timeline.EntryType) *timeline.Entry {
	for i := len(ep.Entries) - 1; i >= 0; i-- {
		if ep.Entries[i].Type == t {
			return &ep.Entries[i]
		}
	}
	return nil
}

// TestTimelineCustomResourceConditions: a custom resource written by
// e2e-writer whose controller reports Ready=False with a message (markup,
// kept as text), then Ready=True. Its timeline, read from the API of an
// exporter configured to track the resource, has the write with its
// manager, each condition change with its reason and message, and the
// close; with the retries collector disabled, a Warning Event about it.
func TestTimelineCustomResourceConditions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dyn := dynamic.NewForConfigOrDie(sb.AdminConfig())
	t.Cleanup(func() {
		_ = dyn.Resource(crdGVR).Delete(context.Background(), "gizmos."+resGroup, metav1.DeleteOptions{})
	})
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd("Gizmo", "gizmos", "Namespaced", true, "v1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// retries disabled: the timelines collector reads Warning Events alone.
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""), "--config.file="+writeConfig(t,
		"collectors: {retries: {enabled: false}}\nresources:\n  - {group: e2e.kce.io, resource: gizmos}\n"))
	e.waitReady(60 * time.Second)
	eventually(t, 30*time.Second, "gizmos tracked", func() (bool, string) {
		v, _ := value(e.scrape(), "kube_convergence_resource_state", map[string]string{"resource": "gizmos.e2e.kce.io", "state": "tracking"})
		return v == 1, fmt.Sprint(v)
	})
	ctl := testController{t: t, kind: "Gizmo", dyn: dyn.Resource(schema.GroupVersionResource{Group: resGroup, Version: "v1", Resource: "gizmos"}).Namespace("default")}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": resGroup + "/v1", "kind": "Gizmo", "metadata": map[string]any{"name": "g1"}, "spec": map[string]any{"size": int64(1)}}}
	created, err := ctl.dyn.Create(ctx, obj, metav1.CreateOptions{FieldManager: "e2e-writer"})
	if err != nil {
		t.Fatal(err)
	}
	const note = "<script>alert(1)</script> waiting for the issuer"
	notReady := condition("Ready", "False", 0)
	notReady["message"] = note
	src := apiSource{t, e}
	eventually(t, 20*time.Second, "the episode open", func() (bool, string) {
		n := len(src.List(timeline.Query{Kind: "Gizmo.e2e.kce.io"}, time.Now()))
		return n == 1, fmt.Sprint(n, " episodes")
	})
	// Its controller's complaint, as a Warning Event about it.
	warn := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "g1.warning"},
		EventTime: metav1.NewMicroTime(time.Now()), ReportingController: "e2e-gizmo-controller", ReportingInstance: "e2e",
		Action: "Reconcile", Reason: "IssuerNotReady", Type: corev1.EventTypeWarning, Note: "<img src=x onerror=alert(1)> issuer missing",
		Regarding: corev1.ObjectReference{APIVersion: resGroup + "/v1", Kind: "Gizmo", Namespace: "default", Name: "g1", UID: created.GetUID()}}
	if _, err := client.EventsV1().Events("default").Create(ctx, warn, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.EventsV1().Events("default").Delete(context.Background(), "g1.warning", metav1.DeleteOptions{})
	})
	eventually(t, 20*time.Second, "the Warning Event recorded", func() (bool, string) {
		eps := src.Object("Gizmo.e2e.kce.io", "default", "g1", time.Now())
		return len(eps) == 1 && countEvents(eps[0], "IssuerNotReady") == 1, fmt.Sprint(len(eps), " episodes")
	})
	ctl.setStatus(ctx, "g1", statusOf(1, notReady))
	eventually(t, 20*time.Second, "Ready=False recorded", func() (bool, string) {
		eps := src.Object("Gizmo.e2e.kce.io", "default", "g1", time.Now())
		return len(eps) == 1 && lastOf(eps[0], timeline.EntryCondition) != nil, fmt.Sprint(len(eps), " episodes")
	})
	ctl.setStatus(ctx, "g1", statusOf(1, condition("Ready", "True", 0)))
	var ep timeline.Episode
	eventually(t, 20*time.Second, "the episode converged", func() (bool, string) {
		eps := src.Object("Gizmo.e2e.kce.io", "default", "g1", time.Now())
		if len(eps) != 1 {
			return false, fmt.Sprint(len(eps), " episodes")
		}
		ep = eps[0]
		return ep.Outcome == "converged", ep.State
	})
	t.Logf("%d entries: %v", len(ep.Entries), entryTypes(ep))
	if w := firstOf(ep, timeline.EntryWrite); w == nil || w.Generation != 1 || !slices.Contains(w.Managers, "e2e-writer") || w.APITime == nil {
		t.Errorf("write entry = %+v, want generation 1 by e2e-writer with its API time", w)
	}
	var conds []string
	for _, en := range ep.Entries {
		if en.Type == timeline.EntryCondition {
			conds = append(conds, en.Reason+" "+en.Message)
			if en.APITime == nil {
				t.Errorf("condition entry %s without its lastTransitionTime", en.Reason)
			}
		}
	}
	if want := []string{"Ready=False Test: " + note, "Ready=True Test: set by the e2e controller"}; !slices.Equal(conds, want) {
		t.Errorf("condition entries = %q, want %q", conds, want)
	}
	if ev := lastOf(ep, timeline.EntryEvent); ev == nil || ev.Message != warn.Note || ev.Controller != "e2e-gizmo-controller" || ev.Count != 1 || ev.Object.UID != string(created.GetUID()) {
		t.Errorf("event entry = %+v, want the Warning about g1 with its note", ev)
	}
}

// unschedulable creates a Deployment whose pod selects a node that does
// not exist.
func unschedulable(t *testing.T, ns string) {
	t.Helper()
	d := demo.Deployment(ns, "web", 1, nil)
	d.Spec.Template.Spec.NodeSelector = map[string]string{"kce-e2e/pool": "nowhere"}
	if _, err := client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkUnschedulable: the timeline of unschedulable's Deployment shows the
// pod created, the scheduler's Unschedulable verdict with its message and
// its FailedScheduling Warning Event about the pod, and the episode held at
// available (the pod counts as updated once created) for that reason.
func checkUnschedulable(t *testing.T, src episodeSource, ns string) {
	t.Helper()
	var ep timeline.Episode
	var sched *timeline.Entry
	eventually(t, 30*time.Second, "the Unschedulable verdict recorded", func() (bool, string) {
		eps := src.List(timeline.Query{Namespace: ns}, time.Now())
		if len(eps) != 1 {
			return false, fmt.Sprint(len(eps), " episodes")
		}
		ep = eps[0]
		sched = lastOf(ep, timeline.EntryScheduled)
		return sched != nil && ep.Reason == "unschedulable", fmt.Sprintf("reason %s, entries %v", ep.Reason, entryTypes(ep))
	})
	t.Logf("entries %v; scheduler: %q", entryTypes(ep), sched.Message)
	if sched.Reason != "Unschedulable" || sched.Node != "" || !strings.Contains(sched.Message, "didn't match Pod's node affinity/selector") ||
		sched.Object == nil || sched.Object.Kind != "Pod" || sched.APITime == nil {
		t.Errorf("scheduled entry = %+v, want the pod Unschedulable with the scheduler's message and its time", sched)
	}
	if ep.Stage != "available" {
		t.Errorf("held at %s, want available", ep.Stage)
	}
	eventually(t, 30*time.Second, "the FailedScheduling event recorded", func() (bool, string) {
		eps := src.List(timeline.Query{Namespace: ns}, time.Now())
		return len(eps) == 1 && countEvents(eps[0], "FailedScheduling") >= 1, fmt.Sprint(entryTypes(eps[0]))
	})
}
