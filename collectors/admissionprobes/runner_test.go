package admissionprobes

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
)

var configmaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func probeRunner(t *testing.T, op string, dyn *dynamicfake.FakeDynamicClient) *runner {
	t.Helper()
	p := config.AdmissionProbe{Name: "p", Resource: "configmaps", Namespace: "probes", Operation: op,
		Object:   map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "probe"}},
		Interval: config.Duration(time.Minute), Timeout: config.Duration(time.Second)}
	c := New(&config.Config{AdmissionProbes: []config.AdmissionProbe{p}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := c.Register(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	gvr := configmaps
	return &runner{c: c, p: p, dyn: dyn, gvr: &gvr}
}

func (r *runner) counts(t *testing.T) (map[string]float64, uint64) {
	t.Helper()
	out := map[string]float64{}
	for _, res := range Results {
		out[res] = testutil.ToFloat64(r.c.results.WithLabelValues(r.p.Name, res))
	}
	var m dto.Metric
	if err := r.c.duration.WithLabelValues(r.p.Name).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	return out, m.GetHistogram().GetSampleCount()
}

func fakeDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{configmaps: "ConfigMapList"}, objs...)
}

// An UPDATE whose read of the object fails sends nothing: error, no
// duration; a read that runs out of its deadline too (nothing reached
// admission, so it is not a timeout).
func TestProbeNotSent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		getEr error
	}{
		{"missing object", nil},
		{"read deadline", context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := fakeDynamic()
			if tc.getEr != nil {
				dyn.PrependReactor("get", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.getEr
				})
			}
			r := probeRunner(t, config.OperationUpdate, dyn)
			r.once(t.Context())
			got, n := r.counts(t)
			if got[Error] != 1 || got[Timeout] != 0 || got[Allowed] != 0 || n != 0 {
				t.Errorf("results %v, %d durations; want 1 error, no duration", got, n)
			}
		})
	}
}

// A sent request is classified, and timed when admission answered:
// allowed is observed; a deadline on the write itself is a timeout,
// counted by reason and not observed.
func TestProbeSent(t *testing.T) {
	r := probeRunner(t, config.OperationCreate, fakeDynamic())
	r.once(t.Context())
	if got, n := r.counts(t); got[Allowed] != 1 || n != 1 {
		t.Errorf("CREATE: results %v, %d durations; want 1 allowed, 1 duration", got, n)
	}
	dyn := fakeDynamic()
	dyn.PrependReactor("delete", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, context.DeadlineExceeded
	})
	r = probeRunner(t, config.OperationDelete, dyn)
	r.once(t.Context())
	if got, n := r.counts(t); got[Timeout] != 1 || n != 0 {
		t.Errorf("DELETE past its deadline: results %v, %d durations; want 1 timeout, no duration (not an answer)", got, n)
	}
	if v := testutil.ToFloat64(r.c.errors.WithLabelValues(r.p.Name, ReasonTimeout)); v != 1 {
		t.Errorf("DELETE past its deadline: errors{reason=timeout} = %v, want 1", v)
	}
}

// A resource the API server does not serve is an error at every interval,
// logged once, and is looked up again.
func TestProbeResolveError(t *testing.T) {
	r := probeRunner(t, config.OperationCreate, fakeDynamic())
	r.gvr = nil
	r.disco = &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "secrets", Namespaced: true}}}}}}
	r.once(t.Context())
	r.once(t.Context())
	if got, n := r.counts(t); got[Error] != 2 || n != 0 || r.gvr != nil || !r.logged {
		t.Errorf("unserved resource: results %v, %d durations, gvr %v, logged %v; want 2 errors, none, nil, true", got, n, r.gvr, r.logged)
	}
}
