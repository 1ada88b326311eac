package informers

import (
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// An update whose old and new objects have different uids is a recreation;
// a resync or a write to the same object is not.
func TestRecreated(t *testing.T) {
	pod := func(uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: types.UID(uid)}}
	}
	for _, c := range []struct {
		name     string
		old, cur any
		want     bool
	}{
		{"same uid", pod("a"), pod("a"), false},
		{"another uid", pod("a"), pod("b"), true},
		{"no old object", nil, pod("b"), false},
		{"not an object", "ns/p", pod("b"), false},
	} {
		if got := Recreated(c.old, c.cur); got != c.want {
			t.Errorf("%s: Recreated = %v, want %v", c.name, got, c.want)
		}
	}
}
