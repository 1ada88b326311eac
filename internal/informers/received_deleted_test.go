package informers

import (
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// A delete notification is dated by its receipt; a tombstone, whose object
// is the last version the cache held, by the relist that found it gone.
func TestDeletedAt(t *testing.T) {
	cached := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	relist := cached.Add(3 * time.Hour)
	now := func() time.Time { return relist }
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p",
		Annotations: map[string]string{AnnotationReceived: strconv.FormatInt(cached.UnixNano(), 10)}}}
	if got := DeletedAt(p, now); !got.Equal(cached) {
		t.Errorf("delete notification dated %v, want its receipt %v", got, cached)
	}
	if got := DeletedAt(cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: p}, now); !got.Equal(relist) {
		t.Errorf("tombstone dated %v, want the relist %v (not the cached version's receipt)", got, relist)
	}
	if got := DeletedAt(&corev1.Pod{}, now); !got.Equal(relist) {
		t.Errorf("unstamped object dated %v, want now", got)
	}
}
