package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// truthLabel marks the pods of the truth Deployments: kwok starts their
// containers (demo.StageRunningNotReady) but never makes them Ready; the
// truth writer does.
const truthLabel = "kce-scale/truth"

// truthAnnotations select demo.StageRunningNotReady with the delays of the
// other pods: Initialized 100 ms after binding, containers running (not
// Ready) 0.5 s later; kwok's pod-ready stage has weight 0 for them.
func truthAnnotations() map[string]string {
	a := map[string]string{}
	for k, v := range demo.NeverReady {
		a[k] = v
	}
	a["pod-create.stage.kwok.x-k8s.io/delay"] = podDelay.String()
	a["pod-create.stage.kwok.x-k8s.io/jitter-delay"] = podDelay.String()
	return a
}

// acceptance brackets the moment the API server accepted a Ready write:
// after before (taken just before the request) and before after (taken
// when the response was read).
type acceptance struct {
	before, after time.Time
}

// truthWriter makes every running truth pod Ready with a status update of
// its own, and records when the API server accepted each write. kwok's
// configured delays are not a truth on a saturated machine (kwok lags);
// the API server's acceptance is.
type truthWriter struct {
	client  kubernetes.Interface
	logger  *slog.Logger
	queue   workqueue.TypedInterface[string]
	lister  cache.Indexer
	mu      sync.Mutex
	written map[string]acceptance // pod uid -> its first Ready write
	failed  int
	// rewritten counts pods made Ready again after another writer (kwok,
	// lagging, applying a status it computed before the truth write) set
	// them not Ready: their truth stays the first write, which the
	// exporter's first ready entry dates.
	rewritten int
}

func startTruthWriter(ctx context.Context, c kubernetes.Interface, logger *slog.Logger, workers int) (*truthWriter, error) {
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = truthLabel + "=true"
	}))
	inf := f.Core().V1().Pods().Informer()
	w := &truthWriter{client: c, logger: logger, queue: workqueue.NewTyped[string](), lister: inf.GetIndexer(), written: map[string]acceptance{}}
	enqueue := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && w.wants(p) {
			if key, err := cache.MetaNamespaceKeyFunc(p); err == nil {
				w.queue.Add(key)
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, cur any) { enqueue(cur) },
	}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("truth writer: pod informer never synced")
	}
	for range workers {
		go w.work(ctx)
	}
	go func() { <-ctx.Done(); w.queue.ShutDown() }()
	return w, nil
}

// wants: a truth pod whose containers kwok started, not Ready. A pod
// written before is written again: another writer took its Ready back (a
// run left a pod not Ready for good when only unwritten pods were).
func (w *truthWriter) wants(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && !podReady(p)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (w *truthWriter) work(ctx context.Context) {
	for {
		key, quit := w.queue.Get()
		if quit {
			return
		}
		w.write(ctx, key)
		w.queue.Done(key)
	}
}

func (w *truthWriter) write(ctx context.Context, key string) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := w.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !w.wants(p) {
			return nil
		}
		setReady(p, metav1.Now())
		before := time.Now()
		got, err := w.client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		after := time.Now()
		if err != nil {
			return err
		}
		w.mu.Lock()
		if _, again := w.written[string(got.UID)]; again {
			w.rewritten++
		} else {
			w.written[string(got.UID)] = acceptance{before: before, after: after}
		}
		w.mu.Unlock()
		return nil
	})
	if err != nil && ctx.Err() == nil {
		w.mu.Lock()
		w.failed++
		w.mu.Unlock()
		w.logger.Warn("truth write failed", "pod", key, "err", err)
	}
}

// setReady marks the containers ready and sets ContainersReady and Ready,
// as the kubelet does when the readiness probes pass.
func setReady(p *corev1.Pod, now metav1.Time) {
	for i := range p.Status.ContainerStatuses {
		p.Status.ContainerStatuses[i].Ready = true
	}
	for _, t := range []corev1.PodConditionType{corev1.ContainersReady, corev1.PodReady} {
		found := false
		for i := range p.Status.Conditions {
			if c := &p.Status.Conditions[i]; c.Type == t {
				c.Status, c.Reason, c.Message, c.LastTransitionTime = corev1.ConditionTrue, "", "", now
				found = true
			}
		}
		if !found {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
	}
}

func (w *truthWriter) results() (written map[string]acceptance, failed, rewritten int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]acceptance, len(w.written))
	for k, v := range w.written {
		out[k] = v
	}
	return out, w.failed, w.rewritten
}

// readyTimes collects, from the exporter's timelines of the truth
// namespaces, the receive time of each pod's first `ready` entry (reason
// ready). Closed episodes are evicted past --timelines.retained (1000 by
// default: fewer than a 20,000-pod run's 4,000 episodes), so it reads them
// every 2 s while the run goes on, not once at its end.
type readyTimes struct {
	base       string
	namespaces []string
	mu         sync.Mutex
	at         map[string]time.Time // pod uid -> receive time
	polls      int
	errs       int
}

func (r *readyTimes) run(ctx context.Context) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		r.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *readyTimes) poll(ctx context.Context) {
	for _, ns := range r.namespaces {
		eps, err := fetchTimelines(ctx, r.base+"/api/v1/timelines?limit=1000&namespace="+url.QueryEscape(ns))
		r.mu.Lock()
		r.polls++
		if err != nil {
			r.errs++
		}
		for _, ep := range eps {
			for _, e := range ep.Entries {
				if e.Type != timeline.EntryReady || e.Reason != "ready" || e.Object == nil || e.Object.UID == "" {
					continue
				}
				if prev, ok := r.at[e.Object.UID]; !ok || e.Time.Before(prev) {
					r.at[e.Object.UID] = e.Time
				}
			}
		}
		r.mu.Unlock()
	}
}

func (r *readyTimes) snapshot() (map[string]time.Time, int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]time.Time, len(r.at))
	for k, v := range r.at {
		out[k] = v
	}
	return out, r.polls, r.errs
}

func fetchTimelines(ctx context.Context, u string) ([]timeline.Episode, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, b)
	}
	var body struct {
		Items []timeline.Episode `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	return body.Items, nil
}

// readyErrors pairs the writer's acceptances with the exporter's receive
// times: late is the exporter's time minus the request's start (an upper
// bound of the error), early its time minus the response (a lower bound);
// missing counts written pods the exporter has no ready entry for.
func readyErrors(written map[string]acceptance, seen map[string]time.Time) (late, early, roundTrip []float64, missing int) {
	for uid, a := range written {
		at, ok := seen[uid]
		if !ok {
			missing++
			continue
		}
		late = append(late, at.Sub(a.before).Seconds())
		early = append(early, at.Sub(a.after).Seconds())
		roundTrip = append(roundTrip, a.after.Sub(a.before).Seconds())
	}
	return late, early, roundTrip, missing
}
