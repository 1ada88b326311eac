package testctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/replay"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
	"github.com/kube-convergence/kube-convergence-exporter/internal/testctl"
)

// RecordingPath is where TestRecordRecorders writes what the API server
// stored of the test controllers' Warning Events; the retries collector's
// tests replay it.
const recordingPath = "../../collectors/retries/testdata/recorders.jsonl"

// Truth is what the controllers did, written beside the recording.
type Truth struct {
	Recorded string `json:"recorded"`
	// Objects: controller -> ConfigMap -> what the controller did.
	Objects map[string]map[string]testctl.Stats `json:"objects"`
	// Backoff describes each object's rate limiter.
	Backoff map[string]string `json:"backoff"`
}

// perKey is a rate limiter per item: the recording needs one object that
// fails fast (the legacy recorder's burst of 25 drains, its spam filter
// then writes one occurrence per 5 minutes) and one whose own back-off is
// longer than the spam filter's refill.
type perKey struct {
	byKey map[string]workqueue.TypedRateLimiter[string]
	def   workqueue.TypedRateLimiter[string]
}

func (p perKey) of(k string) workqueue.TypedRateLimiter[string] {
	if l, ok := p.byKey[k]; ok {
		return l
	}
	return p.def
}
func (p perKey) When(k string) time.Duration { return p.of(k).When(k) }
func (p perKey) Forget(k string)             { p.of(k).Forget(k) }
func (p perKey) NumRequeues(k string) int    { return p.of(k).NumRequeues(k) }

// TestRecordRecorders records, from a real API server, the Warning Events
// client-go's two recorders write for the test controller's failures:
// KCE_RECORD=testctl go test -run TestRecordRecorders -v ./internal/testctl/
// (about 13 minutes: the events.k8s.io series must stay silent past the
// old 10-minute failing window). It rewrites
// collectors/retries/testdata/recorders.jsonl and recorders.truth.json.
//
// Legacy recorder (tools/record), controller kce-testctl-legacy:
//   - legacy-fast: fails for good, back-off 5 ms doubling to 10 s: the
//     spam filter's burst of 25 drains in about 2 minutes, then one write
//     per 5 minutes carrying the skipped occurrences in its count;
//   - legacy-slow: fails for good, its own back-off 40 s doubling to
//     320 s: every occurrence is written (+1), gaps of 320 s are the
//     controller's;
//   - legacy-transient: fails 3 times, then succeeds; legacy-healthy never
//     fails.
//
// events.k8s.io recorder (tools/events), controller kce-testctl-events:
//   - events-fast: fails for good as above: the Event is created, patched
//     to series.count 2, then nothing for 30 minutes (refreshTime);
//   - events-transient: fails 3 times, then succeeds.
func TestRecordRecorders(t *testing.T) {
	if os.Getenv("KCE_RECORD") != "testctl" {
		t.Skip("records from a real API server: KCE_RECORD=testctl")
	}
	const duration = 12*time.Minute + 30*time.Second
	sb := sandbox.StartT(t, sandbox.Options{Only: []sandbox.Component{sandbox.Etcd, sandbox.APIServer}})
	ctx, cancel := context.WithTimeout(context.Background(), duration+3*time.Minute)
	defer cancel()
	ns := "testctl-recorders"
	c := kubernetes.NewForConfigOrDie(sb.AdminConfig())
	createNamespace(ctx, t, c, ns)

	restCfg := rest.CopyConfig(sb.AdminConfig())
	restCfg.ContentType = "application/vnd.kubernetes.protobuf"
	restCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	var out bytes.Buffer
	r, err := replay.NewRecorder(replay.RecordOptions{
		Client: kubernetes.NewForConfigOrDie(restCfg), Resources: []informers.Resource{informers.WarningEvents},
		Namespaces: []string{ns}, Out: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}

	fast := func() workqueue.TypedRateLimiter[string] {
		return workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 10*time.Second)
	}
	legacy := start(ctx, t, sb, testctl.Options{Name: "kce-testctl-legacy", Namespace: ns, Recorder: testctl.LegacyRecorder,
		RateLimiter: perKey{def: fast(), byKey: map[string]workqueue.TypedRateLimiter[string]{
			ns + "/legacy-slow": workqueue.NewTypedItemExponentialFailureRateLimiter[string](40*time.Second, 320*time.Second),
		}}})
	ev := start(ctx, t, sb, testctl.Options{Name: "kce-testctl-events", Namespace: ns, Recorder: testctl.EventsRecorder, RateLimiter: fast()})

	r.Note("legacy: fast and slow fail for good, transient fails 3 times; events: fast fails for good, transient 3 times")
	legacy.FailForGood("legacy-fast")
	legacy.FailForGood("legacy-slow")
	legacy.FailTimes("legacy-transient", 3)
	ev.FailForGood("events-fast")
	ev.FailTimes("events-transient", 3)
	for _, o := range []struct {
		ctl  *testctl.Controller
		name string
	}{{legacy, "legacy-fast"}, {legacy, "legacy-slow"}, {legacy, "legacy-transient"}, {legacy, "legacy-healthy"}, {ev, "events-fast"}, {ev, "events-transient"}} {
		createConfigMap(ctx, t, c, ns, o.name, o.ctl.Name())
	}
	select {
	case <-time.After(duration):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	truth := Truth{
		Recorded: time.Now().UTC().Format(time.RFC3339) + ", kube-apiserver v1.37.2, client-go v0.37.2",
		Objects:  map[string]map[string]testctl.Stats{},
		Backoff: map[string]string{
			"legacy-fast": "5ms doubling to 10s", "legacy-slow": "40s doubling to 320s", "legacy-transient": "5ms doubling to 10s",
			"legacy-healthy": "never fails", "events-fast": "5ms doubling to 10s", "events-transient": "5ms doubling to 10s",
		},
	}
	for _, ctl := range []*testctl.Controller{legacy, ev} {
		m := map[string]testctl.Stats{}
		for _, n := range ctl.Names() {
			m[n] = ctl.Stats(n)
			r.Note("%s %s: %+v", ctl.Name(), n, m[n])
		}
		truth.Objects[ctl.Name()] = m
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(recordingPath, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(truth, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	truthPath := filepath.Join(filepath.Dir(recordingPath), "recorders.truth.json")
	if err := os.WriteFile(truthPath, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d lines", recordingPath, bytes.Count(out.Bytes(), []byte("\n")))
}
