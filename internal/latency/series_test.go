package latency

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
)

var testSLI = Histogram{
	Name:     "x_seconds",
	Help:     "X.",
	Labels:   []Label{{Name: "namespace"}, {Name: "stage", Values: []string{"a", "b"}}},
	Buckets:  []float64{0.5, 1, 300},
	Exceeded: Counter{Name: "x_threshold_exceeded_total", Help: "Crossings of X."},
}

// Open creates the histogram series and a crossing counter per threshold
// at zero, once however often it is called; Cross counts at the threshold
// formatted like le; Observe keeps the exemplar.
func TestSeriesLifecycle(t *testing.T) {
	s := NewSeries(testSLI)
	reg := prometheus.NewPedanticRegistry()
	if err := s.Register(reg); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		s.Open("ns", "a")
	}
	if n := testutil.CollectAndCount(s); n != 1 {
		t.Errorf("histogram series after Open = %d, want 1", n)
	}
	if n := testutil.CollectAndCount(s.Exceeded); n != 3 {
		t.Errorf("crossing series after Open = %d, want 3 (one per bucket)", n)
	}
	if got := testutil.ToFloat64(s.Exceeded.WithLabelValues("ns", "a", "300.0")); got != 0 {
		t.Errorf("crossing counter before a crossing = %v", got)
	}
	s.Cross(2, "ns", "a")
	s.Cross(0, "ns", "a")
	if got := testutil.ToFloat64(s.Exceeded.WithLabelValues("ns", "a", "300.0")); got != 1 {
		t.Errorf("threshold 300.0 = %v, want 1", got)
	}
	if got := testutil.ToFloat64(s.Exceeded.WithLabelValues("ns", "a", "0.5")); got != 1 {
		t.Errorf("threshold 0.5 = %v, want 1", got)
	}
	s.Observe(0.7, Exemplar("uid-1", "3", "web"), "ns", "a")
	var m dto.Metric
	if err := s.WithLabelValues("ns", "a").(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.GetHistogram().GetSampleCount() != 1 {
		t.Errorf("observations = %d, want 1", m.GetHistogram().GetSampleCount())
	}
	found := false
	for _, b := range m.GetHistogram().GetBucket() {
		for _, l := range b.GetExemplar().GetLabel() {
			found = found || (l.GetName() == "uid" && l.GetValue() == "uid-1")
		}
	}
	if !found {
		t.Error("the observation has no exemplar with its uid")
	}
	if _, err := reg.Gather(); err != nil {
		t.Errorf("pedantic gather: %v", err)
	}
}

// A forgotten namespace loses its series and opens again at zero; the
// others keep theirs.
func TestSeriesForgetNamespace(t *testing.T) {
	s := NewSeries(testSLI)
	s.Open("team-a", "a")
	s.Open("team-b", "a")
	s.Cross(1, "team-a", "a")
	s.ForgetNamespace("team-a")
	if n := testutil.CollectAndCount(s) + testutil.CollectAndCount(s.Exceeded); n != 1+3 {
		t.Errorf("series after forgetting team-a = %d, want team-b's 4", n)
	}
	s.Open("team-a", "a")
	if n := testutil.CollectAndCount(s.Exceeded); n != 6 {
		t.Errorf("crossing series after reopening team-a = %d, want 6", n)
	}
	if got := testutil.ToFloat64(s.Exceeded.WithLabelValues("team-a", "a", "1.0")); got != 0 {
		t.Errorf("team-a's crossing after it was forgotten = %v, want 0", got)
	}
}

// A histogram that no SLI reads has no crossing counter: Open creates the
// histogram series alone.
func TestSeriesWithoutCrossings(t *testing.T) {
	h := testSLI
	h.Exceeded = Counter{}
	s := NewSeries(h)
	s.Open("ns", "b")
	if s.Exceeded != nil || len(s.Collectors()) != 1 || testutil.CollectAndCount(s) != 1 {
		t.Errorf("exceeded %v, collectors %d, series %d", s.Exceeded, len(s.Collectors()), testutil.CollectAndCount(s))
	}
	s.ForgetNamespace("ns")
	if n := testutil.CollectAndCount(s); n != 0 {
		t.Errorf("series after ForgetNamespace = %d", n)
	}
}

// The crossing counter's family is the histogram's labels plus threshold,
// and both families say what the registered collectors describe.
func TestSeriesFamilies(t *testing.T) {
	f := testSLI.ExceededFamily()
	if f.Type != metric.Counter || strings.Join(f.Labels, ",") != "namespace,stage,threshold" {
		t.Errorf("crossing family %+v", f)
	}
	for _, c := range NewSeries(testSLI).Collectors() {
		ch := make(chan *prometheus.Desc, 2)
		c.Describe(ch)
		close(ch)
		d := <-ch
		if d.String() != c.Families()[0].Desc().String() {
			t.Errorf("describes %s, declares %s", d, c.Families()[0].Desc())
		}
	}
}

// Observe and Cross on existing series allocate nothing of their own:
// client_golang's label lookup is all (the rollout update path,
// BenchmarkEpisodesObserve, relies on it).
func TestSeriesHotPathAllocations(t *testing.T) {
	s := NewSeries(RolloutDuration)
	s.Open("Deployment", "ns", "available", "template")
	if n := testing.AllocsPerRun(100, func() { s.Cross(4, "Deployment", "ns", "available", "template") }); n != 0 {
		t.Errorf("Cross: %v allocs", n)
	}
	if n := testing.AllocsPerRun(100, func() { s.Observe(1, nil, "Deployment", "ns", "available", "template") }); n != 0 {
		t.Errorf("Observe without exemplar: %v allocs", n)
	}
}

// The declared SLIs are what the metric conventions ask: base units, a
// _total crossing counter per SLI, a namespace label, one-sentence help.
func TestSLIDeclarations(t *testing.T) {
	for _, h := range SLIs() {
		if !h.SLI() || !strings.HasSuffix(h.Name, "_seconds") || !strings.HasSuffix(h.Exceeded.Name, "_threshold_exceeded_total") {
			t.Errorf("%s: crossing counter %q", h.Name, h.Exceeded.Name)
		}
		if !strings.Contains(strings.Join(h.LabelNames(), ","), "namespace") {
			t.Errorf("%s: no namespace label", h.Name)
		}
		for _, help := range []string{h.Help, h.Exceeded.Help} {
			if len([]rune(help)) > metric.MaxHelp {
				t.Errorf("%s: help of %d runes", h.Name, len([]rune(help)))
			}
		}
	}
}
