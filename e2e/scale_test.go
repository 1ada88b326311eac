package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
)

// TestScale is the documented scale run (docs/scale.md), not part of
// `make test`: KCE_SCALE=1 go test -run TestScale -v ./e2e/
// It creates the shape kube-state-metrics was measured on, on this machine
// (2,000 Running pods in 200 Deployments behind 200 Services in 20
// namespaces; docs/scale.md),
// rolls every Deployment once, and reports the exporter's memory, the size
// of /metrics and its series count.
func TestScale(t *testing.T) {
	if os.Getenv("KCE_SCALE") == "" {
		t.Skip("scale run: set KCE_SCALE=1")
	}
	ctx := context.Background()
	// Each kwok node takes 1,000 pods: 2,000 pods plus the rolling update's
	// surge need three.
	for i := range 3 {
		if err := sb.CreateNode(ctx, fmt.Sprintf("kwok-scale-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// --web.enable-pprof: with KCE_SCALE_PROFILES=DIR the run keeps a
	// 30 s CPU profile and a heap profile of the template-change churn
	// there (docs/performance.md aggregates them per package).
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""), "--kube.qps=200", "--kube.burst=400", "--web.enable-pprof")
	e.waitReady(60 * time.Second)
	const namespaces, perNamespace, replicas = 20, 10, 10
	start := time.Now()
	for n := range namespaces {
		ns := namespace(t, fmt.Sprintf("scale-%02d", n))
		for d := range perNamespace {
			name := fmt.Sprintf("app-%02d", d)
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}}}
			if _, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, name, replicas, demo.Delays(100*time.Millisecond, 100*time.Millisecond)), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	total := namespaces * perNamespace
	converged := func(want int) func() (bool, string) {
		return func() (bool, string) {
			mfs := e.scrape()
			var n float64
			for _, m := range mfs["kube_convergence_rollouts_total"].GetMetric() {
				if labelsMatch(m, map[string]string{"outcome": "converged"}) {
					n += m.GetCounter().GetValue()
				}
			}
			return n >= float64(want), fmt.Sprintf("%v of %d converged", n, want)
		}
	}
	eventually(t, 10*time.Minute, "every Deployment converged", converged(total))
	t.Logf("created and converged %d Deployments (%d pods) in %v", total, total*replicas, time.Since(start).Round(time.Second))
	profiled := profileChurn(t, e, os.Getenv("KCE_SCALE_PROFILES"))
	for n := range namespaces {
		for d := range perNamespace {
			setImage(t, fmt.Sprintf("scale-%02d", n), fmt.Sprintf("app-%02d", d), "registry.example/app:v2")
		}
	}
	eventually(t, 10*time.Minute, "every rollout converged", converged(2*total))
	t.Logf("rolled all %d Deployments in %v since start", total, time.Since(start).Round(time.Second))
	<-profiled

	code, body, err := e.get("/metrics")
	if err != nil || code != 200 {
		t.Fatal(code, err)
	}
	began := time.Now()
	_, _, _ = e.get("/metrics")
	scrapeTook := time.Since(began)
	var series int
	for _, l := range strings.Split(body, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			series++
		}
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", e.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	mem := map[string]int{}
	for _, l := range strings.Split(string(status), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && (f[0] == "VmRSS:" || f[0] == "VmHWM:") {
			kb, _ := strconv.Atoi(f[1])
			mem[f[0]] = kb / 1024
		}
	}
	t.Logf("exporter: RSS %d MiB (peak %d MiB); /metrics %.1f KB, %d lines, served in %v",
		mem["VmRSS:"], mem["VmHWM:"], float64(len(body))/1024, series, scrapeTook.Round(time.Millisecond))
}

// profileChurn fetches, into dir, a 30 s CPU profile of the exporter
// starting now, then its heap profile; the channel closes when both are
// written (at once without dir). A failed fetch fails the test.
func profileChurn(t *testing.T, e *exporterProc, dir string) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	if dir == "" {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		for _, p := range []struct{ path, file string }{
			{"/debug/pprof/profile?seconds=30", "cpu.pprof"},
			{"/debug/pprof/heap", "heap.pprof"},
		} {
			code, body, err := e.get(p.path)
			if err != nil || code != http.StatusOK {
				t.Errorf("GET %s = %d %v", p.path, code, err)
				return
			}
			if err := os.WriteFile(filepath.Join(dir, p.file), []byte(body), 0o600); err != nil {
				t.Error(err)
				return
			}
		}
		t.Logf("profiles of the churn in %s", dir)
	}()
	return done
}
