package dashboards

import (
	"fmt"

	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

// The exporter runs as HA replicas (the same series, other instance and
// pod) and as shards (disjoint namespaces). A panel that sums or counts
// folds the replicas first, or it shows every event twice; quantiles are
// left alone (doubling every bucket moves no quantile). docs/slo.md,
// "Replicas and shards".

// replicas folds the exporter's HA replicas within each shard, then adds
// the shards. The shard comes from kube_convergence_shard_info, joined on
// the target (job, instance; cluster where a central query has one): a
// family without a namespace label that counts namespaced objects
// (Warning Events per controller, recovered rollouts per kind, the series
// caps) has the same labels on every shard, and only the shard tells them
// apart. Where no target exports the info (an exporter older than it), the
// plain fold stands in: the busiest shard, a lower bound.
func replicas(expr string) string {
	joined := fmt.Sprintf(`(%s) * on (job, instance, cluster) group_left (shard) max without (total_shards) (kube_convergence_shard_info)`, expr)
	return fmt.Sprintf(`(sum without (shard) (%s) or %s)`, slo.Dedup(joined), slo.Dedup(expr))
}
