package deploy_test

import (
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// podIndexLabel is the label the StatefulSet controller puts on every pod
// of a StatefulSet with its ordinal (k8s.io/api apps/v1 PodIndexLabel;
// e2e/sharding_test.go sees it on the sandbox's pods).
const podIndexLabel = "apps.kubernetes.io/pod-index"

// The shards' StatefulSet, from components/sharding and from the chart:
// replicas = shards = --shard.total, each pod's --shard.index its ordinal
// through the downward API, and the server accepts it.
func TestShardingRenders(t *testing.T) {
	for name, c := range map[string]struct {
		objs      func(t *testing.T) []object
		namespace string
		shards    int
	}{
		"kustomize": {func(t *testing.T) []object { return kustomize(t, kustomizations()["sharding"]) }, "team-a", 2},
		"kustomize with web-config and config": {func(t *testing.T) []object {
			return kustomize(t, kustomizations()["web-config+config+sharding"])
		}, "team-b", 2},
		"helm 3 shards": {func(t *testing.T) []object {
			return helmTemplate(t, "kce", "monitoring", "--set", "sharding.enabled=true,sharding.shards=3")
		}, "monitoring", 3},
	} {
		t.Run(name, func(t *testing.T) {
			objs := c.objs(t)
			var sts appsv1.StatefulSet
			decode(t, only(t, objs, "StatefulSet"), &sts)
			if len(byKind(objs, "Deployment")) != 0 {
				t.Errorf("a Deployment besides the StatefulSet")
			}
			if sts.Spec.Replicas == nil || int(*sts.Spec.Replicas) != c.shards {
				t.Errorf("replicas %v, want %d", sts.Spec.Replicas, c.shards)
			}
			if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
				t.Errorf("podManagementPolicy %q, want Parallel (no shard waits for another)", sts.Spec.PodManagementPolicy)
			}
			var svc corev1.Service
			decode(t, only(t, objs, "Service"), &svc)
			if sts.Spec.ServiceName != svc.Name {
				t.Errorf("serviceName %q, want the rendered Service %q", sts.Spec.ServiceName, svc.Name)
			}
			ct := sts.Spec.Template.Spec.Containers[0]
			flags := argFlags(ct.Args)
			if flags["shard.total"] != strconv.Itoa(c.shards) {
				t.Errorf("--shard.total=%q, want %d (= replicas)", flags["shard.total"], c.shards)
			}
			idx, ok := strings.CutPrefix(flags["shard.index"], "$(")
			idx, _ = strings.CutSuffix(idx, ")")
			if !ok {
				t.Fatalf("--shard.index=%q, want $(VAR) from the downward API", flags["shard.index"])
			}
			var env *corev1.EnvVar
			for i := range ct.Env {
				if ct.Env[i].Name == idx {
					env = &ct.Env[i]
				}
			}
			if env == nil || env.ValueFrom == nil || env.ValueFrom.FieldRef == nil ||
				env.ValueFrom.FieldRef.FieldPath != "metadata.labels['"+podIndexLabel+"']" {
				t.Errorf("env %s = %+v, want the downward API's metadata.labels['%s']", idx, env, podIndexLabel)
			}
			if name == "kustomize with web-config and config" {
				checkWebConfig(t, objs)
				if configFile(t, objs) == nil {
					t.Error("the config component's --config.file is lost")
				}
			}
			dryRun(t, objs, c.namespace)
		})
	}
	t.Run("helm refuses shards with replicas", func(t *testing.T) {
		out, err := command(t.Context(), "", tool(t, "helm"), "template", "x", chartDir, "--set", "sharding.enabled=true,replicas=2")
		if err == nil || !strings.Contains(err.Error(), "set replicas to 1") {
			t.Errorf("sharding.enabled with replicas=2: %v, rendered %d bytes; want a refusal naming replicas", err, len(out))
		}
	})
}

// The HA pair, from components/ha and the chart's replicas: two pods, a
// PodDisruptionBudget that keeps one, an anti-affinity that spreads them,
// one replaced at a time; one replica renders none of it.
func TestHARenders(t *testing.T) {
	for name, c := range map[string]struct {
		objs      func(t *testing.T) []object
		namespace string
		replicas  int32
	}{
		"kustomize":    {func(t *testing.T) []object { return kustomize(t, kustomizations()["ha"]) }, "team-a", 2},
		"helm 2":       {func(t *testing.T) []object { return helmTemplate(t, "kce", "monitoring", "--set", "replicas=2") }, "monitoring", 2},
		"helm 3":       {func(t *testing.T) []object { return helmTemplate(t, "kce", "monitoring", "--set", "replicas=3") }, "monitoring", 3},
		"helm 1 no HA": {func(t *testing.T) []object { return helmTemplate(t, "kce", "monitoring") }, "monitoring", 1},
	} {
		t.Run(name, func(t *testing.T) {
			objs := c.objs(t)
			d := workload(t, objs)
			if d.Spec.Replicas == nil || *d.Spec.Replicas != c.replicas {
				t.Errorf("replicas %v, want %d", d.Spec.Replicas, c.replicas)
			}
			pods := labels.Set(d.Spec.Template.Labels)
			pdbs := byKind(objs, "PodDisruptionBudget")
			aff := d.Spec.Template.Spec.Affinity
			if c.replicas == 1 {
				if len(pdbs) != 0 || aff != nil || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
					t.Errorf("one replica: PDBs %d, affinity %v, strategy %v; want none, none, Recreate (the base)", len(pdbs), aff, d.Spec.Strategy)
				}
				return
			}
			var pdb policyv1.PodDisruptionBudget
			decode(t, only(t, objs, "PodDisruptionBudget"), &pdb)
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || pdb.Spec.Selector.Size() == 0 || !sel.Matches(pods) {
				t.Errorf("PDB selector %v does not select the pods %v", pdb.Spec.Selector, pods)
			}
			if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.MaxUnavailable != nil {
				t.Errorf("PDB minAvailable %v maxUnavailable %v, want minAvailable 1", pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
			}
			if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
				len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0 {
				t.Fatalf("affinity %+v, want one preferred pod anti-affinity term", aff)
			}
			term := aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
			tsel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
			if term.TopologyKey != corev1.LabelHostname || err != nil || !tsel.Matches(pods) {
				t.Errorf("anti-affinity term %+v: want topologyKey %s selecting the pods %v", term, corev1.LabelHostname, pods)
			}
			ru := d.Spec.Strategy.RollingUpdate
			if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || ru.MaxUnavailable.IntValue() != 1 || ru.MaxSurge.IntValue() != 0 {
				t.Errorf("strategy %+v, want RollingUpdate maxUnavailable 1 maxSurge 0 (Recreate would stop both)", d.Spec.Strategy)
			}
			if flags := argFlags(d.Spec.Template.Spec.Containers[0].Args); flags["shard.total"] != "" || flags["shard.index"] != "" {
				t.Errorf("args %v: the HA replicas are one shard, unsharded", d.Spec.Template.Spec.Containers[0].Args)
			}
			dryRun(t, objs, c.namespace)
		})
	}
	// An affinity of the user's wins over the chart's default.
	objs := helmTemplate(t, "kce", "monitoring", "--set", "replicas=2",
		"--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=kubernetes.io/arch",
		"--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists")
	if aff := workload(t, objs).Spec.Template.Spec.Affinity; aff == nil || aff.NodeAffinity == nil || aff.PodAntiAffinity != nil {
		t.Errorf("affinity %+v, want the value's node affinity alone", aff)
	}
}
