package rollouts

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/records"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// SetTimelines makes the collector feed store with the evidence of the
// open episodes (call before Start).
func (c *Collector) SetTimelines(store collectors.Evidence) { c.out.SetTimelines(store) }

// The timeline feed records changes only, and only for workloads with an
// open episode (the store drops the rest; Open spares building them). It
// keeps no per-pod state: the informers hand every update with its
// previous version, which is what a change is measured against. Entries
// are timed on the receipt of the object that shows them (the store sorts
// them by it). They are queued on c.out under c.mu and reach the store
// once c.mu is released. The fact handlers build theirs without c.mu and
// take it only to queue them; they ask the store whether the episode is
// open (c.out.Open) before, without it.

// timelineWorkload records, for a workload record, the write that moved
// its generation (the store keeps one per generation) and what holds its
// episode now; when the record opened the episode, the workload's existing
// ReplicaSets and Pods are related to it, so that Warning Events and
// endpoint changes about them reach it. old is the previous version of
// obj (nil when added): a write that moved the generation without moving
// the last write's managedFields stamp is not attributed (WriteEntry).
// c.mu is held.
func (c *Collector) timelineWorkload(old, obj any, w *tracker.Workload, evs []tracker.Event, now time.Time) {
	if !c.out.Timelines() {
		return
	}
	for _, ev := range evs {
		if ev.Type == tracker.EpisodeOpened && ev.Episode.UID == w.UID {
			c.relateDerived(w.Kind, w.UID)
		}
	}
	if meta := objectMeta(obj); meta != nil {
		managers, at := records.LastWrite(meta)
		cur := timeline.Write{Generation: w.Generation, Managers: managers, At: at, MaybeScale: scaleOnly(old, obj)}
		var prev *timeline.Write
		if o := objectMeta(old); o != nil {
			pm, pat := records.LastWrite(o)
			prev = &timeline.Write{Generation: o.Generation, Managers: pm, At: pat}
		}
		c.out.Add(w.UID, timeline.WriteEntry(prev, cur, now))
	}
	c.block(w.UID, now)
}

// scaleOnly reports whether the change from old to cur moved the replica
// count and nothing else of the spec (the hashes Compact records of the
// pod template and of the rest): all a write through /scale can change.
func scaleOnly(old, cur any) bool {
	om, cm := objectMeta(old), objectMeta(cur)
	if om == nil || cm == nil {
		return false
	}
	for _, k := range []string{informers.AnnotationTemplateHash, informers.AnnotationOtherHash} {
		if om.Annotations[k] != cm.Annotations[k] {
			return false
		}
	}
	return specReplicas(old) != specReplicas(cur)
}

// specReplicas is spec.replicas of a Deployment or StatefulSet (nil: the
// default 1); 0 for anything else (a DaemonSet has no /scale).
func specReplicas(obj any) int32 {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return ptr.Deref(o.Spec.Replicas, 1)
	case *appsv1.StatefulSet:
		return ptr.Deref(o.Spec.Replicas, 1)
	}
	return 0
}

// objectMeta is the metadata of a typed API object; nil for anything else.
func objectMeta(obj any) *metav1.ObjectMeta {
	if m, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if meta, ok := m.GetObjectMeta().(*metav1.ObjectMeta); ok {
			return meta
		}
	}
	return nil
}

// block records what holds uid's open episode now. c.mu is held.
func (c *Collector) block(uid string, now time.Time) {
	if !c.out.Timelines() {
		return
	}
	if st, ok := c.tr.Blocking(uid, now); ok {
		c.out.Block(uid, string(st.Stage), st.Reason, now)
	}
}

// relateDerived relates the existing ReplicaSets and Pods of workload uid
// to its episode. c.mu is held.
func (c *Collector) relateDerived(kind tracker.Kind, uid string) {
	if kind == tracker.Deployment {
		for _, rs := range informers.ByIndex[*appsv1.ReplicaSet](c.view.replicaSets, informers.IndexOwner, uid) {
			c.out.Relate(string(rs.UID), uid)
		}
	}
	for _, p := range c.view.podsOf(kind, uid) {
		c.out.Relate(string(p.UID), uid)
	}
}

// timelineFact records the change of a pod, ReplicaSet or EndpointSlice
// from old (nil: created; a pod recreated under its name during a watch
// gap comes as a deletion then a creation) to obj, received at `at`. The
// fact handlers call it before they re-evaluate the episodes, so that the
// evidence that completes an episode is recorded before the episode closes
// (a handler of its own ran after and found it closed: the last endpoint
// entries were lost). c.mu is not held.
func (c *Collector) timelineFact(old, obj any, at time.Time) {
	if !c.out.Timelines() {
		return
	}
	switch o := obj.(type) {
	case *informers.Pod:
		prev, _ := old.(*informers.Pod)
		c.onPodTimeline(prev, o, at)
	case *appsv1.ReplicaSet:
		if old != nil {
			return // only its creation is news
		}
		owner := ownerUID(o)
		if owner == "" || !c.out.Open(owner) {
			return
		}
		created := o.CreationTimestamp.Time
		c.mu.Lock()
		defer c.mu.Unlock()
		c.out.Add(owner, timeline.Entry{Time: at, APITime: &created, Type: timeline.EntryObject,
			Object: refOf("ReplicaSet", &o.ObjectMeta), Reason: "created"})
	case *discoveryv1.EndpointSlice:
		prev, _ := old.(*discoveryv1.EndpointSlice)
		c.onSliceTimeline(prev, o, at)
	}
}

// timelineGone records the deletion of a pod, ReplicaSet or slice, learned
// at `at`. c.mu is not held.
func (c *Collector) timelineGone(obj any, at time.Time) {
	if !c.out.Timelines() {
		return
	}
	switch o := obj.(type) {
	case *informers.Pod:
		c.onDerivedGone("Pod", c.view.workloadOf(o), at, &o.ObjectMeta)
	case *appsv1.ReplicaSet:
		c.onDerivedGone("ReplicaSet", ownerUID(o), at, &o.ObjectMeta)
	case *discoveryv1.EndpointSlice:
		c.onSliceTimeline(o, nil, at)
	}
}

func refOf(kind string, m *metav1.ObjectMeta) *timeline.ObjectRef {
	return &timeline.ObjectRef{Kind: kind, Namespace: m.Namespace, Name: m.Name, UID: string(m.UID)}
}

func (c *Collector) onPodTimeline(old, p *informers.Pod, at time.Time) {
	uid := c.view.workloadOf(p)
	if uid == "" || !c.out.Open(uid) {
		return
	}
	entries := podEntries(old, p, c.view.nodeReady)
	if len(entries) == 0 {
		return
	}
	ref := refOf("Pod", &p.ObjectMeta)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range entries {
		e.Time, e.Object = at, ref
		c.out.Add(uid, e)
	}
}

// onDerivedGone records the deletion of a Pod or ReplicaSet of workload
// uid, dated on the API side by the delete request. c.mu is not held.
func (c *Collector) onDerivedGone(kind, uid string, at time.Time, m *metav1.ObjectMeta) {
	open := uid != "" && c.out.Open(uid)
	c.mu.Lock()
	defer c.mu.Unlock()
	// Its relation is kept for what follows the deletion (the endpoint's
	// removal), within the store's bound on deleted objects.
	defer c.out.Gone(string(m.UID))
	if !open {
		return
	}
	e := timeline.Entry{Time: at, Type: timeline.EntryObject, Object: refOf(kind, m), Reason: "deleted"}
	if m.DeletionTimestamp != nil {
		// deletionTimestamp is the time of the delete request plus the
		// grace period (k8s.io/apiserver rest.BeforeDelete; a shorter
		// grace moves both): a pod's is 30 s after the request by default,
		// in the future of the delete it dates. Less the grace period it
		// is the request's time.
		t := m.DeletionTimestamp.Time
		if g := m.DeletionGracePeriodSeconds; g != nil {
			t = t.Add(-time.Duration(*g) * time.Second)
		}
		e.APITime = &t
	}
	c.out.Add(uid, e)
}

// podEntries are the timeline entries of a pod's change from old (nil: it
// was created): creation, scheduling (the node, or the scheduler's reason
// it cannot be placed, when it changes), and readiness (turned Ready, not
// Ready, or a new specific reason it is not, once it is on a node).
func podEntries(old, p *informers.Pod, nodeReady func(string) bool) []timeline.Entry {
	var out []timeline.Entry
	if old == nil {
		created := p.CreationTimestamp.Time
		out = append(out, timeline.Entry{Type: timeline.EntryObject, Reason: "created", APITime: &created})
		old = &informers.Pod{}
	}
	switch sched := p.ConditionOf(corev1.PodScheduled); {
	case old.Spec.NodeName == "" && p.Spec.NodeName != "":
		out = append(out, timeline.Entry{Type: timeline.EntryScheduled, Node: p.Spec.NodeName, APITime: transition(sched, corev1.ConditionTrue)})
	case sched != nil && sched.Status == corev1.ConditionFalse && sched.Reason == corev1.PodReasonUnschedulable:
		if was := old.ConditionOf(corev1.PodScheduled); was == nil || was.Status != sched.Status || was.Reason != sched.Reason || was.Message != sched.Message {
			out = append(out, timeline.Entry{Type: timeline.EntryScheduled, Reason: corev1.PodReasonUnschedulable, Message: sched.Message, APITime: transition(sched, corev1.ConditionFalse)})
		}
	}
	ready, wasReady := records.PodReady(p), records.PodReady(old)
	cond := p.ConditionOf(corev1.PodReady)
	reason := tracker.NotReadyReason(records.PodFacts(p, nodeReady))
	switch {
	case ready && !wasReady:
		out = append(out, timeline.Entry{Type: timeline.EntryReady, Reason: "ready", APITime: transition(cond, corev1.ConditionTrue)})
	case !ready && wasReady:
		e := timeline.Entry{Type: timeline.EntryReady, Reason: reason, APITime: transition(cond, corev1.ConditionFalse)}
		if e.Reason == "" {
			e.Reason = "not_ready" // terminating or finished
		}
		if cond != nil {
			e.Message = cond.Reason
		}
		out = append(out, e)
	case !ready && p.Spec.NodeName != "" && reason != "" && reason != tracker.PodOther &&
		reason != tracker.NotReadyReason(records.PodFacts(old, nodeReady)):
		// Still not Ready, for a new reason worth naming (image pull,
		// crash loop...); "other" (starting) is not news.
		out = append(out, timeline.Entry{Type: timeline.EntryReady, Reason: reason})
	}
	return out
}

// transition is the API-side time of c, when it has that status.
func transition(c *informers.PodCondition, status corev1.ConditionStatus) *time.Time {
	if c == nil || c.Status != status || c.LastTransitionTime.IsZero() {
		return nil
	}
	t := c.LastTransitionTime.Time
	return &t
}

// onSliceTimeline records the endpoints of a slice whose state changed
// from old to cur (nil: created or deleted): a ready endpoint, a not ready
// one, or removed. Pods are found by uid among those related to an open
// episode (a deleted pod's endpoint is removed after the pod is gone).
func (c *Collector) onSliceTimeline(old, cur *discoveryv1.EndpointSlice, at time.Time) {
	changes := endpointChanges(old, cur)
	if len(changes) == 0 {
		return
	}
	s := cur
	if s == nil {
		s = old
	}
	var apiTime *time.Time
	if t := records.Slice(s).TriggerTime; !t.IsZero() {
		apiTime = &t
	}
	service := s.Labels[discoveryv1.LabelServiceName]
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range changes {
		c.out.AddRelated(ch.uid, timeline.Entry{Time: at, APITime: apiTime, Type: timeline.EntryEndpoint,
			Object: &timeline.ObjectRef{Kind: "Pod", Namespace: s.Namespace, Name: ch.name, UID: ch.uid},
			Reason: ch.state, Message: service})
	}
}

type endpointChange struct{ uid, name, state string }

// endpointChanges lists the pod endpoints whose state differs between two
// versions of a slice: "ready", "not_ready" (records.ReadyEndpoint: a
// terminating endpoint is not ready), or "removed".
func endpointChanges(old, cur *discoveryv1.EndpointSlice) []endpointChange {
	states := func(s *discoveryv1.EndpointSlice) map[string]endpointChange {
		if s == nil {
			return nil
		}
		m := make(map[string]endpointChange, len(s.Endpoints))
		for i := range s.Endpoints {
			e := &s.Endpoints[i]
			if e.TargetRef == nil || e.TargetRef.Kind != "Pod" {
				continue
			}
			st := "not_ready"
			if records.ReadyEndpoint(e) {
				st = "ready"
			}
			m[string(e.TargetRef.UID)] = endpointChange{string(e.TargetRef.UID), e.TargetRef.Name, st}
		}
		return m
	}
	was, now := states(old), states(cur)
	var out []endpointChange
	if cur != nil {
		for i := range cur.Endpoints { // in the slice's order: stable entries
			e := &cur.Endpoints[i]
			if e.TargetRef == nil || e.TargetRef.Kind != "Pod" {
				continue
			}
			ch := now[string(e.TargetRef.UID)]
			if w, ok := was[ch.uid]; !ok || w.state != ch.state {
				out = append(out, ch)
			}
		}
	}
	if old != nil {
		for i := range old.Endpoints {
			e := &old.Endpoints[i]
			if e.TargetRef == nil || e.TargetRef.Kind != "Pod" {
				continue
			}
			if _, ok := now[string(e.TargetRef.UID)]; !ok {
				ch := was[string(e.TargetRef.UID)]
				ch.state = "removed"
				out = append(out, ch)
			}
		}
	}
	return out
}

// onNodeTimeline records a node's condition changes, received at `at`, in
// the episodes with a pod on it. c.mu is not held: the episodes' pods are
// looked up without it.
func (c *Collector) onNodeTimeline(old, n *corev1.Node, at time.Time) {
	if !c.out.Timelines() {
		return
	}
	entries := nodeEntries(old, n, at)
	if len(entries) == 0 {
		return // a heartbeat
	}
	c.mu.Lock()
	open := c.tr.Open()
	c.mu.Unlock()
	var on []string // the episodes with a pod on n
	for _, ep := range open {
		for _, p := range c.view.podsOf(ep.Kind, ep.UID) {
			if p.Spec.NodeName == n.Name {
				on = append(on, ep.UID)
				break
			}
		}
	}
	if len(on) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, uid := range on {
		for _, e := range entries {
			c.out.Add(uid, e)
		}
	}
}

// nodeEntries are the changes of a node's kept conditions (Ready and the
// pressure conditions, informers.NodeConditionKept) from old to n: a
// condition that appeared or changed status or reason, as "Type=Status"
// with its reason and message, dated by its lastTransitionTime.
func nodeEntries(old, n *corev1.Node, at time.Time) []timeline.Entry {
	before := map[corev1.NodeConditionType]corev1.NodeCondition{}
	for _, c := range old.Status.Conditions {
		before[c.Type] = c
	}
	var out []timeline.Entry
	for _, c := range n.Status.Conditions {
		if !informers.NodeConditionKept(c.Type) {
			continue
		}
		if b, ok := before[c.Type]; ok && b.Status == c.Status && b.Reason == c.Reason {
			continue
		}
		e := timeline.Entry{Time: at, Type: timeline.EntryNode, Node: n.Name,
			Reason: string(c.Type) + "=" + string(c.Status), Message: reasonAndMessage(c.Reason, c.Message)}
		if !c.LastTransitionTime.IsZero() {
			t := c.LastTransitionTime.Time
			e.APITime = &t
		}
		out = append(out, e)
	}
	return out
}

// reasonAndMessage joins a condition's reason and message as "reason:
// message", either alone when the other is empty.
func reasonAndMessage(reason, message string) string {
	switch {
	case reason == "":
		return message
	case message == "":
		return reason
	}
	return reason + ": " + message
}
