package dashboards

import "github.com/kube-convergence/kube-convergence-exporter/slo"

// The exporter runs as HA replicas (the same series, other instance and
// pod) and as shards (disjoint namespaces). A panel that sums or counts
// folds the replicas first, or it shows every event twice; quantiles are
// left alone (doubling every bucket moves no quantile). docs/slo.md,
// "Replicas and shards".

// replicas folds the exporter's HA replicas. The shards' series stay
// apart in a family with a namespace label. A family without one that
// counts namespaced objects (Warning Events per controller, recovered
// rollouts per kind, the series caps) has the same labels on every shard:
// max shows the busiest shard there, a lower bound, where a sum would
// show every replica's count. Telling shards apart needs the shard label
// of kube_convergence_shard_info joined on (job, instance).
func replicas(expr string) string { return slo.Dedup(expr) }
