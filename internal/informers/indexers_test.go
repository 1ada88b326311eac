package informers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestIndexersTakeAnyObject: an object of another type than the
// informer's (a replay can hand one; the seam counts it) is indexed under
// nothing, never a panic in the informer's goroutine.
func TestIndexersTakeAnyObject(t *testing.T) {
	for _, r := range []Resource{Pods, ReplicaSets, EndpointSlices, Services, Nodes} {
		for name, f := range indexersOf(r) {
			for _, obj := range []any{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, "not an object"} {
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Errorf("%s index %q panicked on a %T: %v", r, name, obj, p)
						}
					}()
					_, _ = f(obj)
				}()
			}
		}
	}
}
