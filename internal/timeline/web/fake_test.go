package web

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// fakeSource is a timeline.Source over literal episodes; it records the
// queries it was asked.
type fakeSource struct {
	mu      sync.Mutex
	eps     []timeline.Episode
	queries []timeline.Query
}

func (f *fakeSource) Select(q timeline.Query, _ time.Time) timeline.Selection {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
	var out []timeline.Episode
	for _, e := range f.eps {
		if (q.Namespace == "" && q.Name == "" || e.Namespace == q.Namespace) && (q.Kind == "" || e.Kind == q.Kind) &&
			(q.Name == "" || e.Name == q.Name) &&
			(q.Outcome == "" || e.Outcome == q.Outcome) && (q.State == "" || e.State == q.State) &&
			(q.UID == "" || e.UID == q.UID) && (q.TraceID == "" || e.TraceID == q.TraceID) {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b timeline.Episode) int {
		switch {
		case q.Name != "" && q.Sort == "":
			return cmp.Compare(b.Generation, a.Generation)
		case q.Sort == timeline.SortStart:
			return b.Start.Compare(a.Start)
		}
		return cmp.Compare(b.DurationSeconds, a.DurationSeconds)
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return timeline.Literal(out)
}

func (f *fakeSource) Kinds() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var kinds []string
	for _, e := range f.eps {
		kinds = append(kinds, e.Kind)
	}
	slices.Sort(kinds)
	return slices.Compact(kinds)
}

func (f *fakeSource) lastQuery() timeline.Query {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queries[len(f.queries)-1]
}

// xss is what a field manager, an Event note or a condition message may
// hold: it must come out as text.
const xss = "<script>alert(1)</script>"

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) *time.Time { t := t0.Add(d); return &t }

func secs(f float64) *float64 { return &f }

func reached(stage string, d float64) timeline.StageTiming {
	return timeline.StageTiming{Stage: stage, Reached: true, At: at(time.Duration(d * float64(time.Second))), DurationSeconds: secs(d)}
}

// episodes: a converged Deployment rollout with its earlier superseded
// generation, a stalled StatefulSet, an open certificate and a
// cluster-scoped custom resource.
func episodes() []timeline.Episode {
	apiStart := t0.Add(-400 * time.Millisecond).Truncate(time.Second)
	web3 := timeline.Episode{
		Kind: "Deployment", Namespace: "shop", Name: "web", UID: "uid-web", Generation: 3, Target: 3,
		Change: "template", State: timeline.StateClosed, Outcome: "converged",
		Start: t0, APIStart: apiStart, End: at(5 * time.Second), DurationSeconds: 5,
		TraceID: timeline.TraceID("uid-web", 3),
		Stages: []timeline.StageTiming{
			reached("observed", 0.05), reached("updated", 1.2), reached("available", 3.5), reached("endpoints_ready", 5),
		},
		Entries: []timeline.Entry{
			{Time: t0, APITime: &apiStart, Type: timeline.EntryWrite, Generation: 3, Managers: []string{"kubectl-client-side-apply", xss}},
			{Time: t0.Add(30 * time.Millisecond), Type: timeline.EntryObject, Object: &timeline.ObjectRef{Kind: "ReplicaSet", Namespace: "shop", Name: "web-7c9d"}, Reason: "created"},
			{Time: t0.Add(40 * time.Millisecond), APITime: &apiStart, Type: timeline.EntryEvent, Object: &timeline.ObjectRef{Kind: "ReplicaSet", Namespace: "shop", Name: "web-7c9d"},
				Reason: "FailedCreate", Message: xss, Controller: "replicaset-controller", Count: 2},
			{Time: t0.Add(50 * time.Millisecond), Type: timeline.EntryStage, Stage: "observed"},
			{Time: t0.Add(5 * time.Second), Type: timeline.EntryClosed, Reason: "converged"},
		},
	}
	web2 := web3
	web2.Generation, web2.Target, web2.UID = 2, 2, "uid-web"
	web2.Outcome, web2.DurationSeconds, web2.Start = "superseded", 0.5, t0.Add(-time.Minute)
	web2.End = at(-time.Minute + 500*time.Millisecond)
	web2.TraceID = timeline.TraceID("uid-web", 2)
	web2.Stages = []timeline.StageTiming{reached("observed", 0.02), {Stage: "updated"}, {Stage: "available"}, {Stage: "endpoints_ready"}}
	web2.Entries = nil
	return []timeline.Episode{web3, web2,
		{
			Kind: "StatefulSet", Namespace: "db", Name: "pg", UID: "uid-pg", Generation: 7, Target: 7, Change: "template",
			State: timeline.StateStalled, Start: t0.Add(-10 * time.Minute), APIStart: t0.Add(-10 * time.Minute), DurationSeconds: 600,
			Stage: "ready", Reason: "replica_failure", TraceID: timeline.TraceID("uid-pg", 7),
			Stages:  []timeline.StageTiming{reached("observed", 0.1), {Stage: "ready"}, {Stage: "endpoints_ready"}},
			Entries: []timeline.Entry{{Time: t0.Add(-10 * time.Minute), Type: timeline.EntryWrite, Generation: 7, Managers: []string{"helm"}}},
		},
		{
			Kind: "Certificate.cert-manager.io", Namespace: "shop", Name: "tls", UID: "uid-tls", Generation: 1, Target: 1, Change: "create",
			State: timeline.StateInProgress, Start: t0.Add(-2 * time.Second), APIStart: t0.Add(-2 * time.Second), DurationSeconds: 2,
			Stage: "ready", Reason: "condition_false", TraceID: timeline.TraceID("uid-tls", 1),
			Stages: []timeline.StageTiming{reached("observed", 0.3), {Stage: "ready"}},
			Entries: []timeline.Entry{
				{Time: t0.Add(-time.Second), Type: timeline.EntryCondition, Reason: "Ready=False", Message: xss},
			},
		},
		{
			Kind: "ClusterIssuer.cert-manager.io", Name: "ca", UID: "uid-ca", Generation: 2, Target: 2, Change: "other",
			State: timeline.StateClosed, Outcome: "converged", Start: t0.Add(-time.Hour), APIStart: t0.Add(-time.Hour), End: at(-time.Hour + time.Second), DurationSeconds: 1,
			TraceID: timeline.TraceID("uid-ca", 2),
			Stages:  []timeline.StageTiming{reached("observed", 0.2), reached("ready", 1)},
		},
	}
}
