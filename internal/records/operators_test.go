package records

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/tracker"
)

// The fixtures in testdata/operators are status shapes read from each
// operator's source at a named version (see each file's header). They are
// the injected truth here: what the operator writes, document by
// document, in the order its watch delivers them.

// fixture loads the documents of testdata/operators/<name>.
func fixture(t *testing.T, name string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "operators", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Each document through JSON, as the API serves it: integers stay
	// int64 (a map decode would make them float64).
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var docs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		js, err := utilyaml.ToJSON(doc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.TrimSpace(string(js)) == "null" {
			continue // the header before the first "---"
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		docs = append(docs, u)
	}
	return docs
}

// configured is the convention of one resources entry, parsed as the
// config file is (so that presets apply), and its kind label.
func configured(t *testing.T, entry string) (*Convention, tracker.Kind) {
	t.Helper()
	c, err := config.Parse([]byte("resources:\n  - " + entry + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	conv, err := NewConvention(c.Resources[0])
	if err != nil {
		t.Fatal(err)
	}
	return conv, tracker.Kind("Fixture." + c.Resources[0].Group)
}

var (
	fluxKustomization = "{group: kustomize.toolkit.fluxcd.io, resource: kustomizations}"
	fluxHelmRelease   = "{group: helm.toolkit.fluxcd.io, resource: helmreleases}"
	fluxGitRepository = "{group: source.toolkit.fluxcd.io, resource: gitrepositories}"
	fluxOCIRepository = "{group: source.toolkit.fluxcd.io, resource: ocirepositories}"
	certificates      = "{group: cert-manager.io, resource: certificates}"
	clusterIssuers    = "{group: cert-manager.io, resource: clusterissuers}"
	crossplaneMR      = "{group: s3.aws.m.upbound.io, resource: buckets, preset: crossplane-managed}"
	crossplaneClaim   = "{group: database.example.org, resource: postgresqlinstances, preset: crossplane-claim}"
	prometheuses      = "{group: monitoring.coreos.com, resource: prometheuses}"
	alertmanagers     = "{group: monitoring.coreos.com, resource: alertmanagers}"
	scaledObjects     = "{group: keda.sh, resource: scaledobjects}"
)

// Each document of each fixture, judged by its preset: the generation the
// operator observed, whether it is ready, and why not.
func TestOperatorFixtureRecords(t *testing.T) {
	type want struct {
		observed int64 // 0: none anywhere
		ready    bool
		reason   string
	}
	for _, tc := range []struct {
		file, entry string
		docs        []want // per document
	}{
		{"flux/kustomization.yaml", fluxKustomization, []want{
			{1, true, ""},
			{1, false, tracker.ReasonConditionUnknown}, // Ready=True of generation 1
			{2, false, tracker.ReasonReconciling},      // the conditions carry 2; status.observedGeneration 1
			{2, false, tracker.ReasonReconciling},
			{2, false, tracker.ReasonConditionFalse}, // HealthCheckFailed: observed, not ready
			{2, true, ""},
		}},
		{"flux/helmrelease.yaml", fluxHelmRelease, []want{
			{1, true, ""},
			{1, false, tracker.ReasonConditionUnknown},
			{2, false, tracker.ReasonReconciling}, // lastAttemptedGeneration 2
			{2, false, tracker.ReasonConditionFalse},
			{2, false, tracker.ReasonStalled},
		}},
		{"flux/gitrepository.yaml", fluxGitRepository, []want{
			{1, true, ""},
			{2, false, tracker.ReasonConditionFalse},
		}},
		{"flux/ocirepository.yaml", fluxOCIRepository, []want{
			{1, true, ""},
			{2, false, tracker.ReasonConditionFalse},
		}},
		{"cert-manager/certificate.yaml", certificates, []want{
			{1, true, ""},
			{1, false, tracker.ReasonConditionUnknown},
			{2, false, tracker.ReasonConditionFalse}, // Issuing, first, still says 1
			{2, false, tracker.ReasonConditionFalse},
			{2, true, ""},
		}},
		{"cert-manager/clusterissuer.yaml", clusterIssuers, []want{
			{1, true, ""},
			{2, false, tracker.ReasonConditionFalse},
		}},
		{"crossplane/managed.yaml", crossplaneMR, []want{
			{1, true, ""},
			{1, false, tracker.ReasonConditionUnknown}, // Synced=True of generation 1
			{2, true, ""}, // Ready carries no generation: True counts
			{2, false, tracker.ReasonConditionUnknown},
			{3, false, tracker.ReasonConditionFalse}, // Synced=False ReconcileError
		}},
		{"crossplane/claim.yaml", crossplaneClaim, []want{
			{1, true, ""},
			{1, false, tracker.ReasonConditionUnknown},
			{2, false, tracker.ReasonConditionFalse}, // Waiting
			{2, true, ""},
		}},
		{"prometheus-operator/prometheus.yaml", prometheuses, []want{
			{1, true, ""},
			{1, false, tracker.ReasonConditionUnknown},
			{2, false, tracker.ReasonConditionUnknown}, // Available=Degraded
			{2, true, ""},
		}},
		{"prometheus-operator/alertmanager.yaml", alertmanagers, []want{
			{1, true, ""},
			{2, false, tracker.ReasonConditionFalse}, // Reconciled=False
		}},
		{"keda/scaledobject.yaml", scaledObjects, []want{
			{0, true, ""}, // Active=False: idle, healthy
			{0, true, ""},
			{0, true, ""},
			{0, false, tracker.ReasonConditionFalse},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			conv, kind := configured(t, tc.entry)
			docs := fixture(t, tc.file)
			if len(docs) != len(tc.docs) {
				t.Fatalf("%d documents, the test expects %d", len(docs), len(tc.docs))
			}
			for i, u := range docs {
				o := conv.Compact(u)
				if o.DecodeError != "" {
					t.Errorf("document %d: decode error %s", i, o.DecodeError)
				}
				w := Custom(o, kind, conv)
				got := want{w.ObservedGeneration, w.Custom.Ready, w.Custom.Reason}
				if w.Custom.ObservedUnknown != (tc.docs[i].observed == 0) || got != tc.docs[i] {
					t.Errorf("document %d (generation %d): observed %d (unknown %v) ready %v reason %q; want %+v",
						i, u.GetGeneration(), got.observed, w.Custom.ObservedUnknown, got.ready, got.reason, tc.docs[i])
				}
			}
		})
	}
}

// receipt is one document of a fixture as the exporter received it.
type receipt struct {
	doc    int
	at     string // after t0, the receipt of the first spec write
	listed bool
	want   []string
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func since(d string) time.Time {
	dd, err := time.ParseDuration(d)
	if err != nil {
		panic(err)
	}
	return t0.Add(dd)
}

// replay drives the documents of a fixture through the real convention and
// rollout tracker (stall threshold 5 minutes, the default), and returns the
// tracker.
func replay(t *testing.T, file, entry string, steps []receipt) *tracker.RolloutTracker {
	t.Helper()
	conv, kind := configured(t, entry)
	docs := fixture(t, file)
	tr := tracker.NewRolloutTracker(tracker.RolloutConfig{Thresholds: []float64{1, 5, 30, 300},
		StallAfter: func(tracker.Kind) time.Duration { return 5 * time.Minute }})
	for i, s := range steps {
		var evs []tracker.Event
		if s.doc < 0 {
			evs = tr.Tick(since(s.at))
		} else {
			w := Custom(conv.Compact(docs[s.doc]), kind, conv)
			evs = tr.Observe(w, tracker.Seen{At: since(s.at), Live: !s.listed})
		}
		if g, w := events(evs), strings.Join(s.want, "; "); g != w {
			t.Errorf("step %d (document %d at +%s):\n got: %s\nwant: %s", i, s.doc, s.at, g, w)
		}
	}
	return tr
}

const tick = -1 // a receipt step that only ticks the tracker

// events shows evs as the timelines above read them (crossings left out).
func events(evs []tracker.Event) string {
	var out []string
	for _, e := range evs {
		switch e.Type {
		case tracker.StageReached:
			out = append(out, fmt.Sprintf("reached %s %v", e.Stage, e.Duration))
		case tracker.EpisodeClosed:
			out = append(out, "closed "+string(e.Outcome))
		case tracker.EpisodeRecovered:
			out = append(out, "recovered")
		case tracker.EpisodeStalled:
			out = append(out, fmt.Sprintf("stalled %s %s", e.Stage, e.Reason))
		case tracker.EpisodeOpened:
			out = append(out, "opened")
		}
	}
	return strings.Join(out, "; ")
}

// assertStalled checks the stalls at d: none, or one of stage ready for
// reason, aged age.
func assertStalled(t *testing.T, tr *tracker.RolloutTracker, d, reason string, age time.Duration) {
	t.Helper()
	st := tr.Stalled(since(d))
	switch {
	case reason == "" && len(st) != 0:
		t.Errorf("stalled at +%s: %+v, want none", d, st)
	case reason == "":
	case len(st) != 1 || st[0].Stage != tracker.StageReady || st[0].Reason != reason || st[0].Age != age:
		t.Errorf("stalled at +%s: %+v, want one before stage ready, reason %s, aged %v", d, st, reason, age)
	}
}

// A failing Flux change is observed (its conditions carry the new
// generation while status.observedGeneration stays behind) and stalls
// before ready with reason condition_false: a RolloutStuck, never an
// observed-generation lag. The next successful retry converges it.
func TestFluxKustomizationFailingChange(t *testing.T) {
	tr := replay(t, "flux/kustomization.yaml", fluxKustomization, []receipt{
		{doc: 0, at: "-1h", listed: true},
		{doc: 1, at: "0s", want: []string{"opened"}},
		{doc: 2, at: "350ms", want: []string{"reached observed 350ms"}},
		{doc: 3, at: "1.2s"},
		{doc: 4, at: "31s"},
		{doc: tick, at: "5m1s", want: []string{"stalled ready condition_false"}},
	})
	assertStalled(t, tr, "6m", tracker.ReasonConditionFalse, 6*time.Minute)
	replayMore(t, tr, "flux/kustomization.yaml", fluxKustomization, receipt{doc: 5, at: "12m9.5s",
		want: []string{"reached ready 12m9.5s", "closed converged"}})
	assertStalled(t, tr, "13m", "", 0)
}

// replayMore observes one more document on tr.
func replayMore(t *testing.T, tr *tracker.RolloutTracker, file, entry string, s receipt) {
	t.Helper()
	conv, kind := configured(t, entry)
	w := Custom(conv.Compact(fixture(t, file)[s.doc]), kind, conv)
	if g, w := events(tr.Observe(w, tracker.Seen{At: since(s.at), Live: !s.listed})), strings.Join(s.want, "; "); g != w {
		t.Errorf("document %d at +%s:\n got: %s\nwant: %s", s.doc, s.at, g, w)
	}
}

// A HelmRelease whose upgrade runs out of retries reports Stalled=True: a
// stall at once, before the threshold; its upgrade was observed when it
// was attempted (lastAttemptedGeneration, and the conditions).
func TestFluxHelmReleaseRetriesExceeded(t *testing.T) {
	tr := replay(t, "flux/helmrelease.yaml", fluxHelmRelease, []receipt{
		{doc: 0, at: "-1h", listed: true},
		{doc: 1, at: "0s", want: []string{"opened"}},
		{doc: 2, at: "1.1s", want: []string{"reached observed 1.1s"}},
		{doc: 3, at: "5m1.2s"},
		{doc: 4, at: "10m2.1s"},
		{doc: tick, at: "10m2.5s", want: []string{"stalled ready stalled"}},
	})
	assertStalled(t, tr, "10m3s", tracker.ReasonStalled, 10*time.Minute+3*time.Second)
}

// cert-manager: Issuing comes first and still carries generation 1 when
// Ready carries 2: observed, found by type. Then reissued, converged,
// each stage timed on receipt.
func TestCertificateIssuingBeforeReady(t *testing.T) {
	tr := replay(t, "cert-manager/certificate.yaml", certificates, []receipt{
		{doc: 0, at: "-1h", listed: true},
		{doc: 1, at: "0s", want: []string{"opened"}},
		{doc: 2, at: "200ms", want: []string{"reached observed 200ms"}},
		{doc: 3, at: "900ms"},
		{doc: 4, at: "6.3s", want: []string{"reached ready 6.3s", "closed converged"}},
	})
	assertStalled(t, tr, "1h", "", 0)
}

// KEDA writes no observed generation: a spec write that leaves the
// ScaledObject ready writes nothing and gives no episode, and no stall;
// one that makes it not ready is timed from its receipt and stalls for
// real, with its condition's reason.
func TestKEDAScaledObjectWithoutObservedGeneration(t *testing.T) {
	tr := replay(t, "keda/scaledobject.yaml", scaledObjects, []receipt{
		{doc: 0, at: "-1h", listed: true},
		{doc: 1, at: "0s"},
		{doc: tick, at: "10m"},
		{doc: 2, at: "30m"},
		{doc: 3, at: "30m0.15s", want: []string{"opened"}},
		{doc: tick, at: "35m1s", want: []string{"stalled ready condition_false"}},
	})
	assertStalled(t, tr, "36m", tracker.ReasonConditionFalse, 6*time.Minute)
}

// Crossplane: Synced carries the generation, Ready (set by the provider)
// does not: a spec write converges when Synced catches up with Ready still
// True; a refused one stalls with condition_false.
func TestCrossplaneManagedResource(t *testing.T) {
	tr := replay(t, "crossplane/managed.yaml", crossplaneMR, []receipt{
		{doc: 0, at: "-1h", listed: true},
		{doc: 1, at: "0s", want: []string{"opened"}},
		{doc: 2, at: "2.2s", want: []string{"reached observed 2.2s", "reached ready 2.2s", "closed converged"}},
		{doc: 3, at: "30m", want: []string{"opened"}},
		{doc: 4, at: "30m2.4s", want: []string{"reached observed 2.4s"}},
	})
	assertStalled(t, tr, "36m", tracker.ReasonConditionFalse, 6*time.Minute)
}

// prometheus-operator: Available=Degraded while the new replica starts
// (not ready, Unknown), then True.
func TestPrometheusOperatorPrometheus(t *testing.T) {
	replay(t, "prometheus-operator/prometheus.yaml", prometheuses, []receipt{
		{doc: 0, at: "-1h", listed: true},
		{doc: 1, at: "0s", want: []string{"opened"}},
		{doc: 2, at: "1.1s", want: []string{"reached observed 1.1s"}},
		{doc: 3, at: "29.4s", want: []string{"reached ready 29.4s", "closed converged"}},
	})
}

// An exporter restart (or a CRD re-tracked) lists every object: those the
// operator reports healthy are settled, whatever their conditions'
// lastTransitionTime; those it reports failing are recovered, and stall
// for what they are.
func TestRestartOverOperatorObjects(t *testing.T) {
	for _, tc := range []struct {
		file, entry string
		doc         int
		reason      string // "": healthy, no episode
	}{
		{"flux/kustomization.yaml", fluxKustomization, 5, ""},
		{"flux/kustomization.yaml", fluxKustomization, 4, tracker.ReasonConditionFalse},
		{"flux/helmrelease.yaml", fluxHelmRelease, 0, ""},
		{"flux/helmrelease.yaml", fluxHelmRelease, 4, tracker.ReasonStalled},
		{"flux/gitrepository.yaml", fluxGitRepository, 0, ""},
		{"flux/gitrepository.yaml", fluxGitRepository, 1, tracker.ReasonConditionFalse},
		{"flux/ocirepository.yaml", fluxOCIRepository, 0, ""},
		{"cert-manager/certificate.yaml", certificates, 4, ""},
		{"cert-manager/clusterissuer.yaml", clusterIssuers, 0, ""},
		{"crossplane/managed.yaml", crossplaneMR, 2, ""},
		{"crossplane/claim.yaml", crossplaneClaim, 3, ""},
		{"prometheus-operator/prometheus.yaml", prometheuses, 3, ""},
		{"prometheus-operator/alertmanager.yaml", alertmanagers, 0, ""},
		{"keda/scaledobject.yaml", scaledObjects, 2, ""}, // ready on the status of an older write
		{"keda/scaledobject.yaml", scaledObjects, 3, tracker.ReasonConditionFalse},
	} {
		t.Run(fmt.Sprintf("%s#%d", tc.file, tc.doc), func(t *testing.T) {
			want := []string(nil)
			if tc.reason != "" {
				want = []string{"opened", "recovered"}
			}
			tr := replay(t, tc.file, tc.entry, []receipt{{doc: tc.doc, at: "0s", listed: true, want: want}})
			st := tr.Stalled(since("1h"))
			switch {
			case tc.reason == "" && (len(st) != 0 || len(tr.Open()) != 0):
				t.Errorf("healthy at first sight: open %+v, stalled %+v; want none", tr.Open(), st)
			case tc.reason != "" && (len(st) != 1 || st[0].Reason != tc.reason || st[0].Stage != tracker.StageReady):
				t.Errorf("stalled %+v, want one before ready, reason %s", st, tc.reason)
			}
		})
	}
}

// Bad input, each judged by the rules above, with no stall invented: the
// fixtures altered as a broken or hostile operator would write them.
func TestOperatorBadInput(t *testing.T) {
	t.Run("conditions in any order", func(t *testing.T) {
		conv, kind := configured(t, fluxKustomization)
		u := fixture(t, "flux/kustomization.yaml")[4]
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {2, 0, 1}} {
			shuffled := make([]any, len(order))
			for i, j := range order {
				shuffled[i] = conds[j]
			}
			v := u.DeepCopy()
			_ = unstructured.SetNestedSlice(v.Object, shuffled, "status", "conditions")
			w := Custom(conv.Compact(v), kind, conv)
			if w.ObservedGeneration != 2 || w.Custom.Ready || w.Custom.Reason != tracker.ReasonConditionFalse {
				t.Errorf("order %v: observed %d ready %v reason %q, want 2 false condition_false", order, w.ObservedGeneration, w.Custom.Ready, w.Custom.Reason)
			}
		}
	})
	t.Run("configured paths never present", func(t *testing.T) {
		// A CRD whose objects carry neither the configured
		// observedGeneration path nor the readiness one.
		conv, kind := configured(t, "{group: keda.sh, resource: scaledobjects, observedGeneration: '{.status.seen}', ready: ['{.status.phase}=Ready']}")
		o := conv.Compact(fixture(t, "keda/scaledobject.yaml")[0])
		w := Custom(o, kind, conv)
		if o.DecodeError == "" || !w.Custom.ObservedUnknown || w.Custom.Ready || w.Custom.Reason != tracker.ReasonConditionMissing {
			t.Errorf("decode error %q, unknown %v, ready %v, reason %q; want a decode error, unknown, not ready, condition_missing",
				o.DecodeError, w.Custom.ObservedUnknown, w.Custom.Ready, w.Custom.Reason)
		}
	})
	t.Run("observedGeneration greater than generation", func(t *testing.T) {
		conv, kind := configured(t, certificates)
		docs := fixture(t, "cert-manager/certificate.yaml")
		tr := tracker.NewRolloutTracker(tracker.RolloutConfig{StallAfter: func(tracker.Kind) time.Duration { return time.Minute }})
		for i, at := range []string{"0s", "1s", "2s"} {
			u := docs[min(i, 1)].DeepCopy()
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				c.(map[string]any)["observedGeneration"] = int64(9)
			}
			_ = unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")
			if evs := tr.Observe(Custom(conv.Compact(u), kind, conv), tracker.Seen{At: since(at), Live: i > 0}); len(evs) != 0 {
				t.Errorf("+%s: events %+v, want none", at, evs)
			}
		}
		if st := tr.Stalled(since("1h")); len(st) != 0 || len(tr.Open()) != 0 {
			t.Errorf("open %+v, stalled %+v; want none", tr.Open(), st)
		}
	})
	t.Run("deleted mid-reconcile", func(t *testing.T) {
		// The Kustomization deleted while its health checks run: the
		// deletionTimestamp bumps the generation, and kustomize-controller
		// finalizes it (kustomization_controller.go finalize) instead of
		// converging it.
		tr := replay(t, "flux/kustomization.yaml", fluxKustomization, []receipt{
			{doc: 0, at: "-1h", listed: true},
			{doc: 1, at: "0s", want: []string{"opened"}},
			{doc: 3, at: "1.2s", want: []string{"reached observed 1.2s"}},
		})
		conv, kind := configured(t, fluxKustomization)
		u := fixture(t, "flux/kustomization.yaml")[3]
		u.SetGeneration(3)
		u.SetDeletionTimestamp(&metav1.Time{Time: since("2s")})
		evs := tr.Observe(Custom(conv.Compact(u), kind, conv), tracker.LiveAt(since("2s")))
		// Its crossings flushed (ready >1 s), then closed as deleted.
		if last := evs[len(evs)-1]; last.Type != tracker.EpisodeClosed || last.Outcome != tracker.OutcomeDeleted {
			t.Errorf("events %+v, want the episode closed as deleted", evs)
		}
		if st := tr.Stalled(since("1h")); len(st) != 0 || len(tr.Open()) != 0 {
			t.Errorf("open %+v, stalled %+v; want none", tr.Open(), st)
		}
	})
}
