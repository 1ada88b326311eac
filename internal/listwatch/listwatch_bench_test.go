package listwatch

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// chanWatcher is a watch.Interface over a channel the benchmark feeds.
type chanWatcher chan watch.Event

func (c chanWatcher) Stop()                          {}
func (c chanWatcher) ResultChan() <-chan watch.Event { return c }

// BenchmarkWatchEvent measures what the wrapper adds per live MODIFIED event:
// "direct" is the bare channel the reflector would read, "replay" goes
// through the wrapper with managedFields times already seen (map lookup, no
// observation), "newer" observes delivery lag on every event.
//
//	go test -run '^$' -bench BenchmarkWatchEvent -benchmem ./internal/listwatch/
func BenchmarkWatchEvent(b *testing.B) {
	for _, mode := range []string{"direct", "replay", "newer"} {
		b.Run(mode, func(b *testing.B) {
			// A ring of 1024 pods, larger than the 100-event channel buffer,
			// so a pod is rewritten only after the consumer has read it.
			pods := make([]*v1.Pod, 1024)
			for i := range pods {
				pods[i] = &v1.Pod{ObjectMeta: metav1.ObjectMeta{
					Namespace: "ns", Name: fmt.Sprint("p", i), UID: types.UID(fmt.Sprint("uid-", i)),
					ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Time: &metav1.Time{Time: t0}}},
				}}
			}
			src := make(chanWatcher, 100)
			var w watch.Interface = src
			if mode != "direct" {
				lw := newMetrics(nil, time.Now).Wrap(resource, &scriptedLW{watches: []watchResult{{w: src}}})
				var err error
				if w, err = lw.(cache.ListerWatcherWithContext).WatchWithContext(b.Context(), resume); err != nil {
					b.Fatal(err)
				}
			}
			go func() {
				for i := range b.N {
					p := pods[i%len(pods)]
					if mode == "newer" {
						p.ManagedFields[0].Time.Time = t0.Add(time.Duration(i) * time.Second)
					}
					src <- watch.Event{Type: watch.Modified, Object: p}
				}
			}()
			b.ResetTimer()
			for range b.N {
				<-w.ResultChan()
			}
		})
	}
}
