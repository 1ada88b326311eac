package resources

import (
	"strings"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/records"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// SetTimelines makes the collector feed store with the writes and the
// condition changes of the open episodes (call before Start).
func (c *Collector) SetTimelines(store collectors.Evidence) { c.out.SetTimelines(store) }

// timelineConditions records, before the record is observed, the
// conditions of o whose status, reason or message changed from old in the
// open episode: the change that converges it must be recorded before the
// episode closes. c.mu is held: the tracker says whether the episode is
// open, as the store will once the queue before is delivered.
func (c *Collector) timelineConditions(old, o *records.CustomObject, now time.Time) {
	if !c.out.Timelines() || old == nil || !c.tr.IsOpen(string(o.UID)) {
		return
	}
	for _, e := range conditionEntries(old, o) {
		e.Time = now
		c.out.Add(string(o.UID), e)
	}
}

// timelineObject records, after the record is observed, the write that
// moved its generation (the store keeps one per generation), every
// condition when the record opened the episode (the state it starts
// from), and what holds it now. old is the previous version (nil when
// added): a write that left no managedFields stamp of its own is not
// attributed (timeline.WriteEntry). c.mu is held. As for workloads, the
// write goes to the store whether its episode is open or not (the store
// keeps it only if it is).
func (c *Collector) timelineObject(old, o *records.CustomObject, evs []tracker.Event, now time.Time) {
	if !c.out.Timelines() {
		return
	}
	uid := string(o.UID)
	var prev *timeline.Write
	cur := writeOf(o)
	if old != nil {
		w := writeOf(old)
		prev = &w
		// What a custom resource's change touched is not kept: it may be
		// a write through its /scale subresource.
		cur.MaybeScale = true
	}
	c.out.Add(uid, timeline.WriteEntry(prev, cur, now))
	for _, ev := range evs {
		if ev.Type == tracker.EpisodeOpened && ev.Episode.UID == uid {
			for _, e := range conditionEntries(nil, o) {
				e.Time = now
				c.out.Add(uid, e)
			}
		}
	}
	if st, ok := c.tr.Blocking(uid, now); ok {
		c.out.Block(uid, string(st.Stage), st.Reason, now)
	}
}

// writeOf is the write o records.
func writeOf(o *records.CustomObject) timeline.Write {
	w := timeline.Write{Generation: o.Generation, At: o.WriteTime()}
	if o.WriteManagers != "" {
		w.Managers = strings.Split(o.WriteManagers, "\n")
	}
	return w
}

// conditionEntries are the conditions of o whose status, reason or message
// differ from old's (nil: every condition). Reason is "Type=Status",
// Message the condition's reason and message.
func conditionEntries(old, o *records.CustomObject) []timeline.Entry {
	var out []timeline.Entry
	for _, cd := range o.Conditions {
		if old != nil && hasCondition(old.Conditions, cd) {
			continue
		}
		e := timeline.Entry{Type: timeline.EntryCondition, Reason: cd.Type + "=" + cd.Status, Message: cd.Message}
		if cd.Reason != "" {
			e.Message = cd.Reason + ": " + cd.Message
		}
		if !cd.LastTransition.IsZero() {
			at := cd.LastTransition
			e.APITime = &at
		}
		out = append(out, e)
	}
	return out
}

func hasCondition(cs []records.CustomCondition, cd records.CustomCondition) bool {
	for _, c := range cs {
		if c.Type == cd.Type {
			return c.Status == cd.Status && c.Reason == cd.Reason && c.Message == cd.Message
		}
	}
	return false
}
