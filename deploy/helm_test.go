package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	yamlv3 "gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// chartDir is the Helm chart, relative to this package.
var chartDir = filepath.Join(repoRoot, "deploy", "helm", "kube-convergence-exporter")

// allSwitches turns on every optional object of the chart: what the five
// kustomize components add, with the chart's example config and
// rbac.extraRules (the same as the example overlay's config.yaml and
// ClusterRole patch: TestHelmMatchesKustomize compares them).
var allSwitches = []string{
	"-f", chartConfigValues,
	"--set", "serviceMonitor.enabled=true",
	"--set", "prometheusRule.enabled=true",
	"--set", "dashboards.enabled=true",
	"--set", "networkPolicy.enabled=true",
	"--set", "webConfig.enabled=true",
}

// helmTemplate renders the chart with the pinned Helm.
func helmTemplate(t *testing.T, release, namespace string, args ...string) []object {
	t.Helper()
	out, err := command(t.Context(), "", tool(t, "helm"), append([]string{"template", release, chartDir, "--namespace", namespace}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := parseObjects(out)
	if err != nil {
		t.Fatalf("helm template output: %v", err)
	}
	return objs
}

func TestHelmLint(t *testing.T) {
	helm := tool(t, "helm")
	for name, args := range map[string][]string{
		"defaults":         nil,
		"all switches":     allSwitches,
		"admission probes": {"-f", chartProbeValues},
		"sharding":         {"--set", "sharding.enabled=true,sharding.shards=3"},
		"ha":               {"--set", "replicas=2"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := command(t.Context(), "", helm, append([]string{"lint", "--strict", chartDir}, args...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// TestHelmRenders checks the chart's renderings like the kustomize ones,
// including the server-side dry run, with every switch and value in use.
func TestHelmRenders(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		objs := helmTemplate(t, "kube-convergence-exporter", "kube-convergence")
		checkRendered(t, objs, "kube-convergence")
		kinds := []string{}
		for _, o := range objs {
			kinds = append(kinds, o.kind())
		}
		slices.Sort(kinds)
		if want := []string{"ClusterRole", "ClusterRoleBinding", "Deployment", "Service", "ServiceAccount"}; !slices.Equal(kinds, want) {
			t.Errorf("default values render %v, want %v (every optional object off, like the kustomize base)", kinds, want)
		}
		dryRun(t, objs, "kube-convergence")
	})
	t.Run("everything", func(t *testing.T) {
		// Another release name: every name and reference must follow it.
		objs := helmTemplate(t, "kce", "monitoring", append(slices.Clone(allSwitches),
			"--set", "image.digest=sha256:"+strings.Repeat("ab", 32),
			"--set", "image.pullPolicy=IfNotPresent",
			"--set", "extraArgs={--stall.threshold=10m}",
			"--set", "nodeSelector.kubernetes\\.io/os=linux",
			"--set", "tolerations[0].key=dedicated,tolerations[0].operator=Exists,tolerations[0].effect=NoSchedule",
			"--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=kubernetes.io/arch",
			"--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=In",
			"--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values={amd64}",
			"--set", "resources.requests.memory=256Mi,resources.limits.memory=1Gi",
			"--set", "serviceMonitor.labels.release=kube-prometheus-stack",
			"--set", "prometheusRule.labels.release=kube-prometheus-stack",
			"--set", "podLabels.team=platform",
		)...)
		checkRendered(t, objs, "monitoring")
		checkWebConfig(t, objs)
		for _, o := range objs {
			if !slices.Contains([]string{"kce-kube-convergence-exporter", "kce-kube-convergence-exporter-dashboards", "kce-kube-convergence-exporter-config"}, o.name()) {
				t.Errorf("%s: not named after the release", o.id())
			}
		}
		var d appsv1.Deployment
		decode(t, only(t, objs, "Deployment"), &d)
		pod := d.Spec.Template.Spec
		c := pod.Containers[0]
		if want := "ghcr.io/kube-convergence/kube-convergence-exporter@sha256:" + strings.Repeat("ab", 32); c.Image != want || c.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("image %s (%s), want %s (IfNotPresent)", c.Image, c.ImagePullPolicy, want)
		}
		if argFlags(c.Args)["stall.threshold"] != "10m" {
			t.Errorf("args %q: extraArgs missing", c.Args)
		}
		if pod.NodeSelector["kubernetes.io/os"] != "linux" || len(pod.Tolerations) != 1 || pod.Affinity == nil || pod.Affinity.NodeAffinity == nil {
			t.Errorf("nodeSelector %v, tolerations %v, affinity %v: values not applied", pod.NodeSelector, pod.Tolerations, pod.Affinity)
		}
		if got := c.Resources.Limits.Memory().String(); got != "1Gi" {
			t.Errorf("memory limit %s, want 1Gi", got)
		}
		if d.Spec.Template.Labels["team"] != "platform" || d.Spec.Selector.MatchLabels["team"] != "" {
			t.Errorf("podLabels: template %v, selector %v: want team=platform on the pods only", d.Spec.Template.Labels, d.Spec.Selector.MatchLabels)
		}
		for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
			if l, _ := only(t, objs, kind).meta()["labels"].(map[string]any); l["release"] != "kube-prometheus-stack" {
				t.Errorf("%s labels %v: want release=kube-prometheus-stack", kind, l)
			}
		}
		if rc := configFile(t, objs); rc == nil || rc.configMap != "kce-kube-convergence-exporter-config" {
			t.Errorf("config: want --config.file from the ConfigMap kce-kube-convergence-exporter-config, got %+v", rc)
		}
		dryRun(t, objs, "monitoring")
	})
	t.Run("config rolls the pod", func(t *testing.T) {
		// The exporter reads its file at start: a change of value config
		// must change the pod template, or the old file stays in force.
		checksum := func(args ...string) string {
			var d appsv1.Deployment
			decode(t, only(t, helmTemplate(t, "kce", "monitoring", args...), "Deployment"), &d)
			return d.Spec.Template.Annotations["checksum/config"]
		}
		a := checksum("-f", chartConfigValues)
		b := checksum("-f", chartConfigValues, "--set", "config.resources[0].stallThreshold=20m")
		if a == "" || a == b {
			t.Errorf("checksum/config %q, after a change of config %q: want a checksum that changes", a, b)
		}
		if c := checksum(); c != "" {
			t.Errorf("without config: checksum/config %q, want none (the same pod template as deploy/base)", c)
		}
	})
}

// TestHelmMatchesKustomize renders the chart and the kustomize tree into
// the same namespace and compares them object by object: with default
// values the chart is the base, with every switch on it is the base with
// every component. Only Helm's own labels and the image tag (the chart
// defaults to its appVersion; the base is pinned by an overlay's images
// entry) may differ.
func TestHelmMatchesKustomize(t *testing.T) {
	for name, c := range map[string]struct {
		args []string
		k    kustomization
		only []string // compare only these kinds
	}{
		"defaults = base":                       {k: kustomization{dir: "deploy/base", namespace: "kube-convergence"}},
		"every switch = base + every component": {args: allSwitches, k: kustomizations()["all-components"]},
		// The example probe of components/admission-probes (its
		// kustomization.yaml): the chart's Role and RoleBinding for it are
		// the component's. Only those two kinds are compared: the
		// component leaves the configuration file to components/config.
		"sharding = base + sharding": {args: []string{"--set", "sharding.enabled=true"}, k: kustomizations()["sharding"]},
		"replicas 2 = base + ha":     {args: []string{"--set", "replicas=2"}, k: kustomizations()["ha"]},
		"probe example = base + admission-probes": {
			args: []string{"--set-json", `config.admissionProbes=[{"name":"configmap-create","resource":"configmaps","namespace":"kube-convergence","operation":"CREATE","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kce-admission-probe"}}}]`},
			k:    kustomization{namespace: "kube-convergence", components: []string{"admission-probes"}},
			only: []string{"Role", "RoleBinding"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			chart := normalise(t, helmTemplate(t, "kube-convergence-exporter", c.k.namespace, c.args...))
			kust := normalise(t, kustomize(t, c.k))
			if c.only != nil {
				for _, m := range []map[string]object{chart, kust} {
					for id, o := range m {
						if !slices.Contains(c.only, o.kind()) {
							delete(m, id)
						}
					}
				}
				if len(kust) != len(c.only) {
					t.Fatalf("kustomize renders %d objects of kinds %v, want %d", len(kust), c.only, len(c.only))
				}
			}
			for id := range kust {
				if _, ok := chart[id]; !ok {
					t.Errorf("%s: rendered by kustomize, not by the chart", id)
				}
			}
			for id, h := range chart {
				k, ok := kust[id]
				if !ok {
					t.Errorf("%s: rendered by the chart, not by kustomize", id)
					continue
				}
				if !reflect.DeepEqual(h, k) {
					hb, _ := json.MarshalIndent(h, "", "  ")
					kb, _ := json.MarshalIndent(k, "", "  ")
					t.Errorf("%s differs.\n--- chart\n%s\n--- kustomize\n%s", id, hb, kb)
				}
			}
		})
	}
}

// helmOnlyLabels are the labels the chart adds and the kustomize tree
// does not: Helm's own and the release instance (also in the selectors, so
// that two releases do not select each other's pods).
var helmOnlyLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// configMapHash matches the hash suffix kustomize's configMapGenerator
// gives the configuration's ConfigMap.
var configMapHash = regexp.MustCompile(`^(.*-config)-[a-z0-9]{10}$`)

// normalise indexes objects by kind/name, without Helm's own labels and
// the image tag.
func normalise(t *testing.T, objs []object) map[string]object {
	t.Helper()
	out := map[string]object{}
	dropLabels := func(o object, path ...string) {
		m := map[string]any(o)
		for _, p := range path {
			m, _ = m[p].(map[string]any)
		}
		for _, l := range helmOnlyLabels {
			delete(m, l)
		}
	}
	for _, o := range objs {
		// A copy through JSON: the same number and map types on both sides.
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var c object
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		dropLabels(c, "metadata", "labels")
		switch c.kind() {
		case "ConfigMap":
			// The configuration: kustomize's generated name carries a
			// hash of the content (the chart rolls the pod with an
			// annotation instead), and the two write the same YAML
			// differently.
			meta := c.meta()
			meta["name"] = configMapHash.ReplaceAllString(c.name(), "$1")
			if data, _ := c["data"].(map[string]any); data != nil {
				if text, ok := data["config.yaml"].(string); ok {
					var tree any
					if err := yamlv3.Unmarshal([]byte(text), &tree); err != nil {
						t.Fatalf("%s: config.yaml: %v", c.id(), err)
					}
					data["config.yaml"] = tree
				}
			}
		case "PodDisruptionBudget":
			dropLabels(c, "spec", "selector", "matchLabels")
		case "Deployment", "StatefulSet":
			if aff, ok := c["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["affinity"].(map[string]any); ok {
				if anti, ok := aff["podAntiAffinity"].(map[string]any); ok {
					terms, _ := anti["preferredDuringSchedulingIgnoredDuringExecution"].([]any)
					for _, term := range terms {
						pat := term.(map[string]any)["podAffinityTerm"].(map[string]any)
						ls := pat["labelSelector"].(map[string]any)
						dropLabels(object(ls), "matchLabels")
					}
				}
			}
			dropLabels(c, "spec", "selector", "matchLabels")
			dropLabels(c, "spec", "template", "metadata", "labels")
			tpl := c["spec"].(map[string]any)["template"].(map[string]any)
			if a, ok := tpl["metadata"].(map[string]any)["annotations"].(map[string]any); ok {
				delete(a, "checksum/config")
				if len(a) == 0 {
					delete(tpl["metadata"].(map[string]any), "annotations")
				}
			}
			volumes, _ := tpl["spec"].(map[string]any)["volumes"].([]any)
			for _, v := range volumes {
				if cm, ok := v.(map[string]any)["configMap"].(map[string]any); ok {
					cm["name"] = configMapHash.ReplaceAllString(cm["name"].(string), "$1")
				}
			}
			containers := c["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
			for _, ct := range containers {
				ct := ct.(map[string]any)
				img, _ := ct["image"].(string)
				if i := strings.LastIndex(img, ":"); i > strings.LastIndex(img, "/") {
					ct["image"] = img[:i]
				}
			}
		case "Service":
			dropLabels(c, "spec", "selector")
		case "ServiceMonitor":
			dropLabels(c, "spec", "selector", "matchLabels")
		case "NetworkPolicy":
			dropLabels(c, "spec", "podSelector", "matchLabels")
		}
		out[c.id()] = c
	}
	return out
}

// TestHelmSchemaRejects feeds values.schema.json bad values: Helm must
// refuse them before rendering anything.
func TestHelmSchemaRejects(t *testing.T) {
	helm := tool(t, "helm")
	for name, set := range map[string]string{
		"unknown top-level key": "serviceMonitors.enabled=true",
		"unknown nested key":    "serviceMonitor.honorLabels=false",
		"pull policy":           "image.pullPolicy=Sometimes",
		"digest":                "image.digest=latest",
		"negative sample limit": "serviceMonitor.sampleLimit=-1",
		"interval":              "serviceMonitor.interval=30",
		"switch not a boolean":  "networkPolicy.enabled=yes please",
		"extra arg not a flag":  "extraArgs={stall.threshold=10m}",
		"config unknown key":    "config.resource[0].group=cert-manager.io",
		"config resource typo":  "config.resources[0].group=cert-manager.io,config.resources[0].resorce=certificates",
		"config bad duration":   "config.resources[0].group=cert-manager.io,config.resources[0].resource=certificates,config.resources[0].stallThreshold=10",
		"extra rule typo":       "rbac.extraRules[0].verb=list",
		"extra rule no verbs":   "rbac.extraRules[0].resources={certificates}",
		"no shards":             "sharding.enabled=true,sharding.shards=0",
		"shards not a number":   "sharding.shards=two",
		"sharding typo":         "sharding.shard=2",
		"no replicas":           "replicas=0",
	} {
		t.Run(name, func(t *testing.T) {
			out, err := command(t.Context(), "", helm, "template", "x", chartDir, "--set", set)
			if err == nil {
				t.Errorf("--set %s accepted; rendered %d bytes", set, len(out))
			} else if !strings.Contains(err.Error(), "schema") {
				t.Errorf("--set %s: refused, but not by the schema: %v", set, err)
			}
		})
	}

	// Admission probes: a valid probe, then the same with one fault each.
	probe := func(edit func(map[string]any)) string {
		p := map[string]any{
			"name": "cm", "resource": "configmaps", "namespace": "team-a", "operation": "CREATE", "interval": "30s",
			"object": map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "kce-probe"}},
		}
		edit(p)
		b, err := json.Marshal([]any{p})
		if err != nil {
			t.Fatal(err)
		}
		return "config.admissionProbes=" + string(b)
	}
	valid := probe(func(map[string]any) {})
	if out, err := command(t.Context(), "", helm, "template", "x", chartDir, "--set-json", valid); err != nil || !strings.Contains(string(out), "kind: Role\n") {
		t.Fatalf("--set-json %s: %v; want a Role in\n%s", valid, err, out)
	}
	for name, edit := range map[string]func(map[string]any){
		"probe operation":       func(p map[string]any) { p["operation"] = "PATCH" },
		"probe lower-case op":   func(p map[string]any) { p["operation"] = "create" },
		"probe unknown key":     func(p map[string]any) { p["namespaces"] = p["namespace"] },
		"probe no namespace":    func(p map[string]any) { delete(p, "namespace") },
		"probe bad namespace":   func(p map[string]any) { p["namespace"] = "Team_A" },
		"probe kind not plural": func(p map[string]any) { p["resource"] = "ConfigMap" },
		"probe no object":       func(p map[string]any) { delete(p, "object") },
		"probe bad interval":    func(p map[string]any) { p["interval"] = "30" },
	} {
		t.Run(name, func(t *testing.T) {
			set := probe(edit)
			out, err := command(t.Context(), "", helm, "template", "x", chartDir, "--set-json", set)
			if err == nil {
				t.Errorf("--set-json %s accepted; rendered %d bytes", set, len(out))
			} else if !strings.Contains(err.Error(), "schema") {
				t.Errorf("--set-json %s: refused, but not by the schema: %v", set, err)
			}
		})
	}
}

// TestChartREADMEDocumentsEveryValue keeps the chart's README in step with
// values.yaml: every leaf value appears, by its dotted path, in its table.
func TestChartREADMEDocumentsEveryValue(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yamlv3.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok && len(m) > 0 && prefix != "resources" {
			for k, sub := range m {
				walk(strings.TrimPrefix(prefix+"."+k, "."), sub)
			}
			return
		}
		if !strings.Contains(string(readme), "| `"+prefix+"` |") {
			t.Errorf("value %s is not documented in the chart's README.md (a table row starting | `%s` |)", prefix, prefix)
		}
	}
	walk("", values)
}
