package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
)

// Injected truth: the shard of each namespace among 2, FNV-1a 32 of the
// name modulo 2, computed outside Go (Python, the published FNV constants).
var shardOfNamespace = map[string]string{
	"shard-ns-0": "0", // 0x82190c98
	"shard-ns-1": "1", // 0x83190e2b
	"shard-ns-2": "0", // 0x84190fbe
	"shard-ns-3": "1", // 0x85191151
	"shard-ns-4": "0", // 0x861912e4
	"shard-ns-5": "1", // 0x87191477
}

// lateNamespace is created once the shards have converged; in shard 1
// (0x05bf2c71).
const lateNamespace = "shard-late-b"

// shardPodDelay is each kwok pod stage's delay here: a pod is ready 1.4 s
// after its creation, away from the startup buckets' bounds (1, 2 s), so
// that the exporters, each timing by its own receive times, agree on which
// were crossed.
const shardPodDelay = 700 * time.Millisecond

// series is one sample's identity in a scrape: family and sorted labels.
type series struct{ family, labels string }

// seriesValue is what is compared across exporters: the count of a
// counter or a histogram (closed episodes, occurrences); gauges and sums
// are per-process measurements and only their presence is compared (a
// gauge's only while it is not zero).
type seriesValue struct {
	counted bool
	count   float64
}

// namespacedSeries returns the samples of mfs whose namespace label is one
// of nss.
func namespacedSeries(mfs map[string]*dto.MetricFamily, nss map[string]bool) map[series]seriesValue {
	out := map[series]seriesValue{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ns string
			parts := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				if l.GetName() == "namespace" {
					ns = l.GetValue()
				}
				parts = append(parts, l.GetName()+"="+l.GetValue())
			}
			if !nss[ns] {
				continue
			}
			if mf.GetType() == dto.MetricType_GAUGE && m.GetGauge().GetValue() == 0 {
				// A gauge kept at zero (rollouts in progress) exists once a
				// scrape saw it non-zero: its presence tells when the
				// process was scraped, not what it measured.
				continue
			}
			sort.Strings(parts)
			var v seriesValue
			switch {
			case strings.HasSuffix(name, "_threshold_exceeded_total"):
				// A crossing each process times by its own receive
				// times: compared for presence only.
			case mf.GetType() == dto.MetricType_COUNTER:
				v = seriesValue{true, m.GetCounter().GetValue()}
			case mf.GetType() == dto.MetricType_HISTOGRAM:
				v = seriesValue{true, float64(m.GetHistogram().GetSampleCount())}
			}
			out[series{name, strings.Join(parts, ",")}] = v
		}
	}
	return out
}

// TestShardsPartitionTheSeries runs two shards (--shard.total=2) and one
// unsharded exporter on the same workloads in six namespaces, three per
// shard: the union of the shards' namespaced series is the unsharded
// exporter's, counts included, and no series is in both shards; webhook
// findings are on shard 0 only; a namespace created during the run lands
// in its shard; an exporter of --kube.namespaces has exactly its
// namespaces' series; the StatefulSet controller labels pods with their ordinal
// (what deploy/components/sharding reads as --shard.index).
func TestShardsPartitionTheSeries(t *testing.T) {
	ctx := context.Background()
	srv := startWebhookServer(t)
	kubeconfig := "--kubeconfig=" + sb.Kubeconfig("")
	exporters := map[string]*exporterProc{
		"all": startExporter(t, kubeconfig, "--stall.threshold="+stallThreshold.String()),
		"0":   startExporter(t, kubeconfig, "--stall.threshold="+stallThreshold.String(), "--shard.total=2", "--shard.index=0"),
		"1":   startExporter(t, kubeconfig, "--stall.threshold="+stallThreshold.String(), "--shard.total=2", "--shard.index=1"),
		// Two namespaces, watched one by one.
		"some": startExporter(t, kubeconfig, "--stall.threshold="+stallThreshold.String(), "--kube.namespaces=shard-ns-0,shard-ns-3"),
	}
	for _, e := range exporters {
		e.waitReady(60 * time.Second)
	}
	for name, want := range map[string]map[string]string{
		"all":  {"shard": "0", "total_shards": "1"},
		"0":    {"shard": "0", "total_shards": "2"},
		"1":    {"shard": "1", "total_shards": "2"},
		"some": {"shard": "0", "total_shards": "1"},
	} {
		mf := exporters[name].scrape()["kube_convergence_shard_info"]
		if mf == nil || len(mf.GetMetric()) != 1 || !labelsMatch(mf.GetMetric()[0], want) || mf.GetMetric()[0].GetGauge().GetValue() != 1 {
			t.Errorf("exporter %s: kube_convergence_shard_info %v, want one series %v = 1", name, mf.GetMetric(), want)
		}
	}

	// Workloads: a Deployment behind a Service and a Warning Event in each
	// namespace; a StatefulSet in one.
	workload := func(ns string) {
		namespace(t, ns)
		service(t, ns, "web")
		if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "web", 2, demo.Delays(shardPodDelay, shardPodDelay)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.EventsV1().Events(ns).Create(ctx, gapEvent(ns, "web-backoff", "e2e-shard-"+ns, 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nss := map[string]bool{}
	for _, ns := range slices.Sorted(maps.Keys(shardOfNamespace)) {
		workload(ns)
		nss[ns] = true
	}
	replicas := int32(2)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shard-ns-1", Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, ServiceName: "web", PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: demo.PodTemplate("db", demo.Delays(shardPodDelay, shardPodDelay))},
	}
	if _, err := client.AppsV1().StatefulSets("shard-ns-1").Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A webhook configuration with findings (unscoped: it matches every
	// namespace, kube-system included).
	cfg := "shard-audit"
	unscoped := hook("unscoped.shard.kce.test", "", srv, "")
	unscoped.NamespaceSelector = nil
	validating(t, cfg, unscoped)

	// The StatefulSet controller's ordinal label, on the sandbox's v1.37.
	eventually(t, 30*time.Second, "StatefulSet pods with apps.kubernetes.io/pod-index", func() (bool, string) {
		pods, err := client.CoreV1().Pods("shard-ns-1").List(ctx, metav1.ListOptions{LabelSelector: "app=db"})
		if err != nil || len(pods.Items) != 2 {
			return false, fmt.Sprintf("pods %v err %v", len(pods.Items), err)
		}
		for _, p := range pods.Items {
			if want := strings.TrimPrefix(p.Name, "db-"); p.Labels[appsv1.PodIndexLabel] != want {
				return false, fmt.Sprintf("pod %s: label %s=%q, want %q", p.Name, appsv1.PodIndexLabel, p.Labels[appsv1.PodIndexLabel], want)
			}
		}
		return true, ""
	})

	checkPartition := func(nss map[string]bool, shardOf func(ns string) string) {
		t.Helper()
		eventually(t, 60*time.Second, "the shards' series partition the unsharded exporter's", func() (bool, string) {
			all := namespacedSeries(exporters["all"].scrape(), nss)
			shard := map[string]map[series]seriesValue{"0": namespacedSeries(exporters["0"].scrape(), nss), "1": namespacedSeries(exporters["1"].scrape(), nss)}
			seen := map[string]bool{}
			for s := range all {
				seen[s.family] = true
			}
			// Every namespace must have reached the unsharded exporter's
			// rollouts, pods, endpoints and retries before the comparison
			// means anything.
			for _, fam := range []string{"kube_convergence_rollouts_total"} {
				for ns := range nss {
					found := false
					for s := range all {
						found = found || (s.family == fam && strings.Contains(s.labels, "namespace="+ns))
					}
					if !found {
						return false, fmt.Sprintf("unsharded: no %s for %s yet", fam, ns)
					}
				}
			}
			var problems []string
			for s, v := range all {
				ns := ""
				for _, kv := range strings.Split(s.labels, ",") {
					if n, ok := strings.CutPrefix(kv, "namespace="); ok {
						ns = n
					}
				}
				want, other := shardOf(ns), map[string]string{"0": "1", "1": "0"}[shardOf(ns)]
				got, ok := shard[want][s]
				switch {
				case !ok:
					problems = append(problems, fmt.Sprintf("%s{%s}: unsharded, missing from shard %s", s.family, s.labels, want))
				case v.counted && got.count != v.count:
					problems = append(problems, fmt.Sprintf("%s{%s}: %v unsharded, %v on shard %s", s.family, s.labels, v.count, got.count, want))
				}
				if _, ok := shard[other][s]; ok {
					problems = append(problems, fmt.Sprintf("%s{%s}: also on shard %s", s.family, s.labels, other))
				}
			}
			for name, m := range shard {
				for s := range m {
					if _, ok := all[s]; !ok {
						problems = append(problems, fmt.Sprintf("%s{%s}: on shard %s, not unsharded", s.family, s.labels, name))
					}
				}
			}
			// Warning Events: the retries families have no namespace
			// label; each namespace's Event names a controller of its
			// own, counted once, on its namespace's shard only.
			mfs := map[string]map[string]*dto.MetricFamily{"all": exporters["all"].scrape(), "0": exporters["0"].scrape(), "1": exporters["1"].scrape()}
			for ns := range nss {
				match := map[string]string{"controller": "e2e-shard-" + ns}
				want := shardOf(ns)
				for _, name := range []string{"all", "0", "1"} {
					v, ok := value(mfs[name], "kube_convergence_controller_retries_total", match)
					if shouldHave := name == "all" || name == want; ok != shouldHave || (ok && v != 1) {
						problems = append(problems, fmt.Sprintf("exporter %s: retries of %s: %v (present %v), want present %v with 1", name, match["controller"], v, ok, shouldHave))
					}
				}
			}
			sort.Strings(problems)
			return len(problems) == 0, fmt.Sprintf("%d series in %d families unsharded; %d problems: %s", len(all), len(seen), len(problems), strings.Join(problems[:min(10, len(problems))], "; "))
		})
	}
	checkPartition(nss, func(ns string) string { return shardOfNamespace[ns] })

	// --kube.namespaces: the included namespaces' series, the same as the
	// unsharded exporter's, and no other namespace's.
	eventually(t, 30*time.Second, "the included namespaces' series", func() (bool, string) {
		all := namespacedSeries(exporters["all"].scrape(), nss)
		some := namespacedSeries(exporters["some"].scrape(), nss)
		var problems []string
		for sr, v := range all {
			got, ok := some[sr]
			in := strings.Contains(sr.labels+",", "namespace=shard-ns-0,") || strings.Contains(sr.labels+",", "namespace=shard-ns-3,")
			switch {
			case in && !ok:
				problems = append(problems, fmt.Sprintf("%s{%s}: missing", sr.family, sr.labels))
			case in && v.counted && got.count != v.count:
				problems = append(problems, fmt.Sprintf("%s{%s}: %v, unsharded %v", sr.family, sr.labels, got.count, v.count))
			case !in && ok:
				problems = append(problems, fmt.Sprintf("%s{%s}: not an included namespace", sr.family, sr.labels))
			}
		}
		for sr := range some {
			if _, ok := all[sr]; !ok {
				problems = append(problems, fmt.Sprintf("%s{%s}: not unsharded", sr.family, sr.labels))
			}
		}
		sort.Strings(problems)
		return len(problems) == 0 && len(some) > 0, fmt.Sprintf("%d series; %d problems: %s", len(some), len(problems), strings.Join(problems[:min(10, len(problems))], "; "))
	})

	// Webhook findings: shard 0 and the unsharded exporter, equal; none on
	// shard 1, nor any other kube_convergence_webhook_* series.
	eventually(t, 30*time.Second, "webhook findings on shard 0", func() (bool, string) {
		all, zero := findings(exporters["all"].scrape(), cfg), findings(exporters["0"].scrape(), cfg)
		return len(all[unscoped.Name]) > 0 && maps.EqualFunc(all, zero, slices.Equal), fmt.Sprintf("unsharded %v, shard 0 %v", all, zero)
	})
	for name, mf := range exporters["1"].scrape() {
		if strings.HasPrefix(name, "kube_convergence_webhook_") && len(mf.GetMetric()) > 0 {
			t.Errorf("shard 1 exports %s (%d series): webhook configurations belong to shard 0", name, len(mf.GetMetric()))
		}
	}

	// A namespace created now lands in its shard (1).
	workload(lateNamespace)
	nss[lateNamespace] = true
	checkPartition(map[string]bool{lateNamespace: true}, func(string) string { return "1" })
	checkPartition(nss, func(ns string) string {
		if ns == lateNamespace {
			return "1"
		}
		return shardOfNamespace[ns]
	})
	t.Cleanup(func() {
		for ns := range nss {
			_ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})
}
