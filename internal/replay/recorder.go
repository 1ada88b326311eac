package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/listwatch"
)

// RecordOptions configure a Recorder.
type RecordOptions struct {
	Client  kubernetes.Interface
	Dynamic dynamic.Interface // custom resources and CRDs; nil: none
	// Resources are recorded: typically all.ResourcesOf(cfg), what the
	// exporter would watch with cfg.
	Resources []informers.Resource
	// Unrecorded are resources the exporter watches whose notifications a
	// scenario leaves out (a 100-replica rollout's pods would be megabytes
	// of lines nobody reads): each gets an empty list cycle at the start,
	// so that the replay's collectors attach to it.
	Unrecorded []informers.Resource
	// Namespaces, when set, trims the recording to their objects: namespaced
	// objects of other namespaces are dropped, and Namespace objects of
	// other names; other cluster-scoped objects (Nodes, CRDs, webhook
	// configurations) are kept.
	Namespaces []string
	Out        io.Writer
	Now        func() time.Time // nil: time.Now
}

// Recorder writes what the informers of the exporter would receive from a
// cluster as a recording. Each resource has a client-go reflector of its
// own over the same list/watch calls (informers.ListerWatcher) and the same
// instrumentation (package listwatch: it stamps receive times and says
// which objects a list cycle or a gap's backlog delivered) as the
// exporter's informers; the reflector's store is the recorder, which
// writes every object as the API server sent it, before any transform, in
// the order the reflectors hand them over.
type Recorder struct {
	o       RecordOptions
	keepNS  map[string]bool
	stores  []*recordingStore
	cancel  context.CancelFunc
	done    sync.WaitGroup
	stopped bool

	mu  sync.Mutex // serialises the writes
	w   *bufio.Writer
	err error
}

// NewRecorder checks o and returns a recorder; Start starts it.
func NewRecorder(o RecordOptions) (*Recorder, error) {
	if o.Client == nil || o.Out == nil || len(o.Resources) == 0 {
		return nil, errors.New("replay: a recorder needs a client, resources and an output")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	r := &Recorder{o: o, w: bufio.NewWriterSize(o.Out, 64<<10)}
	if len(o.Namespaces) > 0 {
		r.keepNS = map[string]bool{}
		for _, ns := range o.Namespaces {
			r.keepNS[ns] = true
		}
	}
	return r, nil
}

// Start starts one reflector per resource; they list at once.
func (r *Recorder) Start(ctx context.Context) error {
	ctx, r.cancel = context.WithCancel(ctx)
	m := listwatch.NewMetrics(nil)
	type run struct {
		refl *cache.Reflector
	}
	var runs []run
	for _, res := range r.o.Resources {
		lw, example, err := informers.ListerWatcher(r.o.Client, r.o.Dynamic, res)
		if err != nil {
			r.cancel()
			return fmt.Errorf("replay: record %s: %w", res, err)
		}
		s := &recordingStore{r: r, resource: res, synced: make(chan struct{})}
		r.stores = append(r.stores, s)
		runs = append(runs, run{cache.NewReflectorWithOptions(m.Wrap(res.String(), lw), example, s, cache.ReflectorOptions{
			Name: "recorder " + res.String(), TypeDescription: res.String(),
		})})
	}
	for _, res := range r.o.Unrecorded {
		r.write(Notification{Resource: res.String(), Type: typeListEnd, At: r.o.Now()})
	}
	for _, rn := range runs {
		r.done.Go(func() { rn.refl.RunWithContext(ctx) })
	}
	return nil
}

// WaitForSync returns once every resource has completed its first list.
func (r *Recorder) WaitForSync(ctx context.Context) error {
	for _, s := range r.stores {
		select {
		case <-s.synced:
		case <-ctx.Done():
			return fmt.Errorf("replay: %s not listed: %w", s.resource, ctx.Err())
		}
	}
	return nil
}

// WaitForRelists returns once every resource has completed n list cycles
// (the first list included).
func (r *Recorder) WaitForRelists(ctx context.Context, n int) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		done := true
		for _, s := range r.stores {
			if s.lists.Load() < int64(n) {
				done = false
				break
			}
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			var behind []string
			for _, s := range r.stores {
				if s.lists.Load() < int64(n) {
					behind = append(behind, s.resource.String())
				}
			}
			return fmt.Errorf("replay: %d list cycles not seen for %v: %w", n, behind, ctx.Err())
		case <-t.C:
		}
	}
}

// Note writes a note line: what the scenario did, for the reader.
func (r *Recorder) Note(format string, args ...any) {
	r.write(Notification{Type: typeNote, At: r.o.Now(), Note: fmt.Sprintf(format, args...)})
}

// Stop stops the reflectors, writes the end line and flushes. It returns
// the first write error.
func (r *Recorder) Stop() error {
	if r.cancel != nil {
		r.cancel()
	}
	r.done.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stopped {
		r.writeLocked(Notification{Type: typeEnd, At: r.o.Now()})
		r.stopped = true
		if err := r.w.Flush(); err != nil && r.err == nil {
			r.err = err
		}
	}
	return r.err
}

func (r *Recorder) write(n ...Notification) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range n {
		r.writeLocked(x)
	}
}

func (r *Recorder) writeLocked(n Notification) {
	if r.err != nil || r.stopped {
		return
	}
	b, err := json.Marshal(n)
	if err != nil {
		r.err = err
		return
	}
	if _, err := r.w.Write(append(b, '\n')); err != nil {
		r.err = err
	}
}

// keep says whether obj belongs in a trimmed recording.
func (r *Recorder) keep(res informers.Resource, m metav1.Object) bool {
	if r.keepNS == nil {
		return true
	}
	if ns := m.GetNamespace(); ns != "" {
		return r.keepNS[ns]
	}
	if res == informers.Namespaces {
		return r.keepNS[m.GetName()]
	}
	return true
}

// recordingStore is one reflector's store: it writes what it is handed.
type recordingStore struct {
	r        *Recorder
	resource informers.Resource
	listed   bool
	last     time.Time // of the last line written: one reflector goroutine uses it
	synced   chan struct{}
	lists    atomic.Int64
}

func (s *recordingStore) Add(obj any) error    { return s.event(typeAdded, obj) }
func (s *recordingStore) Update(obj any) error { return s.event(typeModified, obj) }
func (s *recordingStore) Delete(obj any) error { return s.event(typeDeleted, obj) }
func (s *recordingStore) Resync() error        { return nil }

func (s *recordingStore) event(typ string, obj any) error {
	n, ok, err := s.notification(typ, obj)
	if err != nil || !ok {
		return err
	}
	s.r.write(n)
	return nil
}

// Replace is a completed list cycle: its objects in key order (the order
// of a LIST; a WatchList stream's come through a map), then list-end.
func (s *recordingStore) Replace(objs []any, _ string) error {
	items := make([]Notification, 0, len(objs))
	for _, o := range sortedByKey(objs) {
		n, ok, err := s.notification(typeList, o)
		if err != nil {
			return err
		}
		if ok {
			items = append(items, n)
		}
	}
	out := make([]Notification, 0, len(items)+2)
	if s.listed {
		out = append(out, Notification{Type: typeNote, Resource: s.resource.String(), At: s.r.o.Now(), Note: "relist"})
	}
	out = append(out, items...)
	end := s.r.o.Now()
	s.last = end
	out = append(out, Notification{Type: typeListEnd, Resource: s.resource.String(), At: end})
	s.r.write(out...)
	if !s.listed {
		s.listed = true
		close(s.synced)
	}
	s.lists.Add(1)
	return nil
}

// notification is obj as a line: the receive stamps become At and Live,
// the object keeps nothing of the exporter's.
func (s *recordingStore) notification(typ string, obj any) (Notification, bool, error) {
	ro, ok := obj.(runtime.Object)
	if !ok {
		return Notification{}, false, fmt.Errorf("replay: record %s: a %T is not an object", s.resource, obj)
	}
	ro = ro.DeepCopyObject()
	m, err := meta.Accessor(ro)
	if err != nil {
		return Notification{}, false, fmt.Errorf("replay: record %s: %w", s.resource, err)
	}
	if !s.r.keep(s.resource, m) {
		return Notification{}, false, nil
	}
	at, listed := informers.Received(ro)
	if at.IsZero() {
		at = s.r.o.Now()
	}
	a := m.GetAnnotations()
	delete(a, informers.AnnotationReceived)
	delete(a, informers.AnnotationListed)
	if len(a) == 0 {
		a = nil
	}
	m.SetAnnotations(a)
	if ro.GetObjectKind().GroupVersionKind().Empty() {
		// The typed clientset clears apiVersion and kind.
		gvks, _, err := scheme.Scheme.ObjectKinds(ro)
		if err != nil || len(gvks) == 0 {
			return Notification{}, false, fmt.Errorf("replay: record %s: no kind for %T: %w", s.resource, ro, err)
		}
		ro.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
	b, err := json.Marshal(ro)
	if err != nil {
		return Notification{}, false, fmt.Errorf("replay: record %s: %w", s.resource, err)
	}
	// A stream's events are stamped as they arrive, possibly while the
	// reflector is still handing over the list before them (a WatchList
	// stream's next event after its initial-events-end bookmark, seen a
	// few microseconds before the list-end): the line keeps its resource's
	// order.
	if typ != typeList && at.Before(s.last) {
		at = s.last
	}
	if typ != typeList {
		s.last = at
	}
	n := Notification{Resource: s.resource.String(), Type: typ, At: at, Object: b}
	if typ != typeList {
		n.Live = ptr.To(!listed)
	}
	return n, true, nil
}
