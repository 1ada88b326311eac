package main

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseStatCPU(t *testing.T) {
	// A comm with spaces and a parenthesis; utime 250, stime 75 ticks.
	stat := "4242 (kube (state) m) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 12 0 100 1000000 2000 18446744073709551615"
	got, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if got != 3.25 {
		t.Errorf("cpu = %v s, want 3.25 (325 ticks at 100 Hz)", got)
	}
	if _, err := parseStatCPU("4242 (x) S 1 2"); err == nil {
		t.Error("a short stat line parsed")
	}
	// This process: a number, and it grows when the process works.
	before, err := cpuSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
		_ = strings.Repeat("x", 1000)
	}
	after, _ := cpuSeconds(os.Getpid())
	if after < before {
		t.Errorf("cpu went from %v to %v", before, after)
	}
}

func TestParseStatusMemory(t *testing.T) {
	status := "Name:\tkube-state-metr\nVmPeak:\t 2000000 kB\nVmHWM:\t  112640 kB\nVmRSS:\t   90112 kB\nThreads:\t12\n"
	m, err := parseStatusMemory(status)
	if err != nil {
		t.Fatal(err)
	}
	if m.rss != 90112*1024 || m.hwm != 112640*1024 {
		t.Errorf("rss %d hwm %d, want %d and %d", m.rss, m.hwm, 90112*1024, 112640*1024)
	}
	if _, err := parseStatusMemory("Name:\tx\nVmRSS:\t 1 kB\n"); err == nil {
		t.Error("a status without VmHWM parsed")
	}
}

func TestQuantile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for q, want := range map[float64]float64{0.5: 5, 0.99: 10, 0.1: 1, 0.11: 2} {
		if got := quantile(xs, q); got != want {
			t.Errorf("quantile(%v) = %v, want %v", q, got, want)
		}
	}
	if xs[0] != 5 {
		t.Error("quantile sorted its input")
	}
	if !math.IsNaN(quantile(nil, 0.5)) {
		t.Error("quantile of nothing is not NaN")
	}
}

func TestSample(t *testing.T) {
	for _, c := range []struct {
		line, family string
		want         []string
		v            float64
		ok           bool
	}{
		{`kube_convergence_rollouts_total{kind="Deployment",namespace="a",outcome="converged"} 12`, "kube_convergence_rollouts_total", []string{`outcome="converged"`}, 12, true},
		{`kube_convergence_rollouts_total{kind="Deployment",namespace="a",outcome="superseded"} 3`, "kube_convergence_rollouts_total", []string{`outcome="converged"`}, 0, false},
		{`kube_convergence_rollouts_total_created 3`, "kube_convergence_rollouts_total", nil, 0, false},
		{`go_memstats_heap_inuse_bytes 1.2e+07`, "go_memstats_heap_inuse_bytes", nil, 1.2e7, true},
		{`# HELP go_memstats_heap_inuse_bytes x`, "go_memstats_heap_inuse_bytes", nil, 0, false},
		{`kube_pod_status_ready{namespace="a",pod="p",uid="u",condition="true"} 1`, "kube_pod_status_ready", []string{`condition="true"`}, 1, true},
		{`kube_pod_status_ready_time{namespace="a",pod="p",uid="u"} 1.7e9`, "kube_pod_status_ready", nil, 0, false},
	} {
		v, ok := sample(c.line, c.family, c.want...)
		if ok != c.ok || v != c.v {
			t.Errorf("sample(%q, %q) = %v, %v; want %v, %v", c.line, c.family, v, ok, c.v, c.ok)
		}
	}
}

func TestShape(t *testing.T) {
	for pods, want := range map[int]shape{
		2000:  {pods: 2000, deployments: 200, namespaces: 10, truthDeployments: 5, truthNS: 1, nodes: 4},
		20000: {pods: 20000, deployments: 2000, namespaces: 100, truthDeployments: 20, truthNS: 1, nodes: 31},
		400:   {pods: 400, deployments: 40, namespaces: 2, truthDeployments: 5, truthNS: 1, nodes: 2},
	} {
		got, err := newShape(pods)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("newShape(%d) = %+v, want %+v", pods, got, want)
		}
		refs := got.deploymentRefs()
		perNS, truth := map[string]int{}, 0
		for _, r := range refs {
			perNS[r.namespace]++
			if r.truth {
				truth++
				if !strings.HasPrefix(r.namespace, "scale-truth-") {
					t.Errorf("truth Deployment %s/%s outside a truth namespace", r.namespace, r.name)
				}
			} else if strings.HasPrefix(r.namespace, "scale-truth-") {
				t.Errorf("Deployment %s/%s in a truth namespace", r.namespace, r.name)
			}
		}
		if len(refs) != want.deployments || truth != want.truthDeployments || len(perNS) != want.namespaces {
			t.Errorf("%d pods: %d Deployments (%d truth) in %d namespaces, want %d (%d) in %d", pods, len(refs), truth, len(perNS), want.deployments, want.truthDeployments, want.namespaces)
		}
		if got.nodes*podsPerNode < pods*13/10 {
			t.Errorf("%d pods: %d nodes hold %d pods, less than the surge's %d", pods, got.nodes, got.nodes*podsPerNode, pods*13/10)
		}
	}
	for _, bad := range []int{0, 200, 2100, -400} {
		if _, err := newShape(bad); err == nil || !strings.Contains(err.Error(), "SCALE_PODS") {
			t.Errorf("newShape(%d): %v, want an error naming SCALE_PODS", bad, err)
		}
	}
}

func TestReadyErrors(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	written := map[string]acceptance{
		"a": {before: t0, after: t0.Add(10 * time.Millisecond)},
		"b": {before: t0, after: t0.Add(4 * time.Millisecond)},
	}
	seen := map[string]time.Time{"a": t0.Add(15 * time.Millisecond), "other": t0}
	late, early, rt, missing := readyErrors(written, seen)
	if missing != 1 || len(late) != 1 {
		t.Fatalf("missing %d, matched %d; want 1 and 1", missing, len(late))
	}
	if !near(late[0], 0.015) || !near(early[0], 0.005) || !near(rt[0], 0.010) {
		t.Errorf("late %v early %v round trip %v, want 0.015, 0.005, 0.010", late, early, rt)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// setReady leaves the pod as the kubelet would once readiness passes:
// ContainersReady and Ready True, every container ready, other conditions
// and the running state untouched.
func TestSetReady(t *testing.T) {
	started := metav1.NewTime(time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC))
	p := &corev1.Pod{Status: corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}},
	}}
	now := metav1.NewTime(started.Add(time.Second))
	setReady(p, now)
	if !podReady(p) {
		t.Error("not Ready after setReady")
	}
	for _, c := range p.Status.Conditions {
		switch c.Type {
		case corev1.ContainersReady, corev1.PodReady:
			if c.Status != corev1.ConditionTrue || c.Reason != "" || !c.LastTransitionTime.Equal(&now) {
				t.Errorf("%s = %+v", c.Type, c)
			}
		case corev1.PodInitialized:
			if c.Status != corev1.ConditionTrue {
				t.Errorf("Initialized changed: %+v", c)
			}
		}
	}
	if cs := p.Status.ContainerStatuses[0]; !cs.Ready || cs.State.Running == nil {
		t.Errorf("container status %+v", cs)
	}
}

func TestTable(t *testing.T) {
	tb := &table{header: []string{"figure", "a", "b"}}
	tb.add("x | y", "1", "2")
	want := "| figure | a | b |\n| --- | --- | --- |\n| x \\| y | 1 | 2 |\n"
	if got := tb.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

// The probe of the exporter's --web.enable-pprof reads kingpin's help as
// kingpin writes it: a boolean flag as --[no-]name.
func TestHelpHasReadsKingpinHelp(t *testing.T) {
	app := kingpin.New("exporter", "")
	app.Flag("web.enable-pprof", "Serve pprof.").Bool()
	app.Flag("web.listen-address", "Listen there.").String()
	var help strings.Builder
	app.UsageWriter(&help)
	app.Usage(nil)
	for _, name := range []string{"web.enable-pprof", "web.listen-address"} {
		if !helpHas(help.String(), name) {
			t.Errorf("helpHas(%q) = false on kingpin's help:\n%s", name, help.String())
		}
	}
	if helpHas(help.String(), "web.enable-pprof-x") || helpHas(help.String(), "enable-nothing") {
		t.Error("helpHas finds a flag the help does not list")
	}
}
