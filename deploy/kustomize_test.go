package deploy_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
)

// A kustomization to render: an existing directory, or base plus
// components in a generated one.
type kustomization struct {
	dir        string   // relative to the repository root; empty: generated
	namespace  string   // where everything namespaced must end up
	components []string // names under deploy/components, in order
	// withConfig adds what a user's overlay adds for components/config:
	// the ConfigMap generated from deploy/overlays/example/config.yaml and
	// that overlay's ClusterRole patch for it.
	withConfig bool
}

// exampleOverlay is the overlay that shows components/config in use; its
// config.yaml and clusterrole-patch.yaml are what withConfig adds.
const exampleOverlay = "deploy/overlays/example"

// kustomizations is every way the tree is meant to be used: the base
// alone, each component on its own (web-config also after
// prometheus-operator, whose ServiceMonitor it patches), all of them, and
// every overlay (checked against the directory by TestEveryOverlayAndComponentRendered).
func kustomizations() map[string]kustomization {
	return map[string]kustomization{
		"base":                           {dir: "deploy/base", namespace: "kube-convergence"},
		"overlays/example":               {dir: "deploy/overlays/example", namespace: "monitoring"},
		"prometheus-operator":            {namespace: "team-a", components: []string{"prometheus-operator"}},
		"grafana-dashboards":             {namespace: "team-a", components: []string{"grafana-dashboards"}},
		"network-policy":                 {namespace: "team-a", components: []string{"network-policy"}},
		"web-config":                     {namespace: "team-a", components: []string{"web-config"}},
		"prometheus-operator+web-config": {namespace: "team-b", components: []string{"prometheus-operator", "web-config"}},
		"config":                         {namespace: "team-a", components: []string{"config"}, withConfig: true},
		"admission-probes":               {namespace: "team-a", components: []string{"admission-probes"}},
		"sharding":                       {namespace: "team-a", components: []string{"sharding"}},
		"ha":                             {namespace: "team-a", components: []string{"ha"}},
		// sharding last: it changes the Deployment's kind, which the
		// other components' patches target.
		"web-config+config+sharding": {namespace: "team-b", components: []string{"web-config", "config", "sharding"}, withConfig: true},
		"all-components": {namespace: "kube-convergence", components: []string{
			"prometheus-operator", "grafana-dashboards", "network-policy", "web-config", "config",
		}, withConfig: true},
	}
}

// kustomize renders k with the pinned kubectl's kustomize.
func kustomize(t *testing.T, k kustomization) []object {
	t.Helper()
	dir := k.dir
	if dir == "" {
		// A generated overlay in a scratch directory; kustomize wants
		// relative paths to the base and components.
		tmp := t.TempDir()
		root, err := filepath.Abs(repoRoot)
		if err != nil {
			t.Fatal(err)
		}
		rel := func(p string) string {
			r, err := filepath.Rel(tmp, filepath.Join(root, p))
			if err != nil {
				t.Fatal(err)
			}
			return filepath.ToSlash(r)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: %s\nresources:\n  - %s\ncomponents:\n", k.namespace, rel("deploy/base"))
		for _, c := range k.components {
			fmt.Fprintf(&b, "  - %s\n", rel(filepath.Join("deploy", "components", c)))
		}
		if k.withConfig {
			// kustomize reads generator and patch files only from within
			// the kustomization's directory: copies.
			for _, f := range []string{"config.yaml", "clusterrole-patch.yaml"} {
				content, err := os.ReadFile(filepath.Join(root, exampleOverlay, f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(tmp, f), content, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			b.WriteString("configMapGenerator:\n  - name: kube-convergence-exporter-config\n    files:\n      - config.yaml\n")
			b.WriteString("patches:\n  - target:\n      kind: ClusterRole\n      name: kube-convergence-exporter\n    path: clusterrole-patch.yaml\n")
		}
		if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		dir = tmp
	} else {
		dir = filepath.Join(repoRoot, dir)
	}
	out, err := command(t.Context(), "", tool(t, "kubectl"), "kustomize", dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := parseObjects(out)
	if err != nil {
		t.Fatalf("kustomize output: %v", err)
	}
	return objs
}

func TestKustomizeRenders(t *testing.T) {
	for name, k := range kustomizations() {
		t.Run(name, func(t *testing.T) {
			objs := kustomize(t, k)
			checkRendered(t, objs, k.namespace)
			dryRun(t, objs, k.namespace)

			// What each component adds, and nothing else.
			workload := "Deployment"
			if slices.Contains(k.components, "sharding") {
				workload = "StatefulSet"
			}
			want := []string{"ClusterRole", "ClusterRoleBinding", workload, "Service", "ServiceAccount"}
			comps := k.components
			if name == "overlays/example" {
				comps = []string{"prometheus-operator", "grafana-dashboards", "network-policy", "web-config", "config"}
			}
			for _, c := range comps {
				want = append(want, map[string][]string{
					"prometheus-operator": {"PrometheusRule", "ServiceMonitor"},
					"grafana-dashboards":  {"ConfigMap"},
					"network-policy":      {"NetworkPolicy"},
					"config":              {"ConfigMap"}, // generated by the overlay
					"admission-probes":    {"Role", "RoleBinding"},
					"ha":                  {"PodDisruptionBudget"},
				}[c]...)
			}
			slices.Sort(want)
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.kind())
			}
			slices.Sort(kinds)
			if !slices.Equal(kinds, want) {
				t.Errorf("rendered %v, want %v", kinds, want)
			}
			if slices.Contains(comps, "web-config") {
				checkWebConfig(t, objs)
			}
			if slices.Contains(comps, "config") != (configFile(t, objs) != nil) {
				t.Errorf("components %v, but --config.file mounted: %v", comps, configFile(t, objs) != nil)
			}
		})
	}
}

// TestEveryOverlayAndComponentRendered keeps kustomizations() complete.
func TestEveryOverlayAndComponentRendered(t *testing.T) {
	covered := map[string]bool{}
	for _, k := range kustomizations() {
		if k.dir != "" {
			covered[k.dir] = true
		}
		if len(k.components) == 1 {
			covered["deploy/components/"+k.components[0]] = true
		}
	}
	for _, parent := range []string{"deploy/overlays", "deploy/components"} {
		entries, err := os.ReadDir(filepath.Join(repoRoot, parent))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if p := parent + "/" + e.Name(); e.IsDir() && !covered[p] {
				t.Errorf("%s is not rendered by TestKustomizeRenders: add it to kustomizations()", p)
			}
		}
	}
}

// checkRendered asserts what every rendering must satisfy, for the
// kustomize tree and the Helm chart alike.
func checkRendered(t *testing.T, objs []object, namespace string) {
	t.Helper()
	// The admission probes' Roles and RoleBindings live in the namespaces
	// the probes write to; everything else namespaced in the release's.
	probeNS := probeNamespaces(t, objs)
	for _, o := range objs {
		if o.kind() == "Namespace" {
			t.Errorf("renders a Namespace %s: an overlay onto a shared namespace would relabel it, and delete it on uninstall", o.name())
		}
		switch {
		case clusterScoped[o.kind()]:
			if o.namespace() != "" {
				t.Errorf("%s: cluster-scoped with namespace %q", o.id(), o.namespace())
			}
		case (o.kind() == "Role" || o.kind() == "RoleBinding") && probeNS[o.namespace()]:
		case o.namespace() != namespace:
			t.Errorf("%s: namespace %q, want %q", o.id(), o.namespace(), namespace)
		}
		if l, _ := o.meta()["labels"].(map[string]any); l["app.kubernetes.io/name"] != "kube-convergence-exporter" {
			t.Errorf("%s: labels %v, want app.kubernetes.io/name=kube-convergence-exporter", o.id(), l)
		}
	}

	var sa corev1.ServiceAccount
	decode(t, only(t, objs, "ServiceAccount"), &sa)
	var role rbacv1.ClusterRole
	decode(t, only(t, objs, "ClusterRole"), &role)
	for _, r := range role.Rules {
		for _, v := range r.Verbs {
			if v != "list" && v != "watch" {
				t.Errorf("ClusterRole rule %v grants %q: the exporter only lists and watches", r, v)
			}
		}
	}
	var binding rbacv1.ClusterRoleBinding
	decode(t, only(t, objs, "ClusterRoleBinding"), &binding)
	if binding.RoleRef.Name != role.Name || binding.RoleRef.Kind != "ClusterRole" {
		t.Errorf("ClusterRoleBinding roleRef %+v, want the ClusterRole %s", binding.RoleRef, role.Name)
	}
	if want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: namespace}}; !slices.Equal(binding.Subjects, want) {
		t.Errorf("ClusterRoleBinding subjects %+v, want %+v", binding.Subjects, want)
	}

	checkRoleBindings(t, objs, sa.Name, namespace)

	d := workload(t, objs)
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != sa.Name {
		t.Errorf("Deployment runs as service account %q, the chart/overlay creates %q", pod.ServiceAccountName, sa.Name)
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("Deployment selector %v does not match its pod template labels %v (%v)", d.Spec.Selector, d.Spec.Template.Labels, err)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("Deployment has %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	flags := argFlags(c.Args)
	listenPort := flagPort(t, flags, "web.listen-address")
	probePort := flagPort(t, flags, "web.probe-address")
	if listenPort == probePort {
		t.Errorf("--web.probe-address and --web.listen-address share port %d: with --web.config.file the probes would need TLS and credentials", listenPort)
	}
	containerPort := func(p intstr.IntOrString) int32 {
		if p.Type == intstr.Int {
			return p.IntVal
		}
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				return cp.ContainerPort
			}
		}
		t.Errorf("port %q is not a container port", p.StrVal)
		return -1
	}
	// Probes reach an unauthenticated path and port: /healthz and
	// /readyz over plain HTTP on the probe listener, which serves them
	// without --web.config.file's TLS and basic auth.
	for name, p := range map[string]*corev1.Probe{"startupProbe": c.StartupProbe, "livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe", name)
			continue
		}
		if p.HTTPGet.Scheme != "" && p.HTTPGet.Scheme != corev1.URISchemeHTTP {
			t.Errorf("%s: scheme %s, want HTTP (the probe listener has no TLS)", name, p.HTTPGet.Scheme)
		}
		if p.HTTPGet.Path != "/healthz" && p.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: path %q, the probe listener serves only /healthz and /readyz", name, p.HTTPGet.Path)
		}
		if got := containerPort(p.HTTPGet.Port); got != probePort {
			t.Errorf("%s: port %s (%d), want the --web.probe-address port %d", name, p.HTTPGet.Port.String(), got, probePort)
		}
	}
	if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("readinessProbe on %s, want /readyz (it waits for the informers)", c.ReadinessProbe.HTTPGet.Path)
	}

	checkConfig(t, objs)

	var svc corev1.Service
	decode(t, only(t, objs, "Service"), &svc)
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("Service selector %v does not select the pods %v", svc.Spec.Selector, d.Spec.Template.Labels)
	}
	if len(svc.Spec.Ports) != 1 || containerPort(svc.Spec.Ports[0].TargetPort) != listenPort {
		t.Errorf("Service ports %+v: want one port to the metrics listener :%d", svc.Spec.Ports, listenPort)
	}

	for _, o := range byKind(objs, "ServiceMonitor") {
		var sm monitoringv1.ServiceMonitor
		decode(t, o, &sm)
		checkServiceMonitor(t, &sm, &svc)
	}
	for _, o := range byKind(objs, "PrometheusRule") {
		var pr monitoringv1.PrometheusRule
		decode(t, o, &pr)
		if len(pr.Spec.Groups) == 0 {
			t.Error("PrometheusRule has no groups")
		}
		for _, g := range pr.Spec.Groups {
			if len(g.Rules) == 0 {
				t.Errorf("PrometheusRule group %s has no rules", g.Name)
			}
		}
	}
	for _, o := range byKind(objs, "NetworkPolicy") {
		var np networkingv1.NetworkPolicy
		decode(t, o, &np)
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || np.Spec.PodSelector.Size() == 0 || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("NetworkPolicy podSelector %v does not select the exporter's pods %v", np.Spec.PodSelector, d.Spec.Template.Labels)
		}
		if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
			t.Errorf("NetworkPolicy policyTypes %v, want [Ingress] (the exporter must reach the API server)", np.Spec.PolicyTypes)
		}
		if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) == 0 || len(np.Spec.Ingress[0].Ports) != 1 ||
			np.Spec.Ingress[0].Ports[0].Port == nil || containerPort(*np.Spec.Ingress[0].Ports[0].Port) != listenPort {
			t.Errorf("NetworkPolicy ingress %+v: want one rule from named peers to the metrics port %d only", np.Spec.Ingress, listenPort)
		}
	}
	cfg := configFile(t, objs)
	for _, o := range byKind(objs, "ConfigMap") {
		var cm corev1.ConfigMap
		decode(t, o, &cm)
		if cfg != nil && cm.Name == cfg.configMap {
			continue // checked by configFile
		}
		if _, ok := cm.Labels["grafana_dashboard"]; !ok {
			t.Errorf("ConfigMap %s lacks the sidecar's label grafana_dashboard", cm.Name)
		}
		if len(cm.Data) == 0 {
			t.Errorf("ConfigMap %s holds no dashboards", cm.Name)
		}
		for k, v := range cm.Data {
			var dash struct {
				UID string `json:"uid"`
			}
			if err := json.Unmarshal([]byte(v), &dash); err != nil || dash.UID+".json" != k {
				t.Errorf("ConfigMap %s: %s is not the dashboard of that uid (uid %q, %v)", cm.Name, k, dash.UID, err)
			}
		}
	}
}

// checkServiceMonitor asserts that prometheus-operator would scrape the
// Service through sm, keeping the exporter's own labels.
func checkServiceMonitor(t *testing.T, sm *monitoringv1.ServiceMonitor, svc *corev1.Service) {
	t.Helper()
	// Without a namespaceSelector the operator looks in the
	// ServiceMonitor's own namespace only; a selector naming a fixed
	// namespace would survive an overlay's `namespace:` and scrape nothing.
	if sm.Spec.NamespaceSelector.Any || len(sm.Spec.NamespaceSelector.MatchNames) > 0 {
		t.Errorf("ServiceMonitor namespaceSelector %+v, want none (its own namespace)", sm.Spec.NamespaceSelector)
	}
	if sm.Namespace != svc.Namespace {
		t.Errorf("ServiceMonitor in %q, Service in %q", sm.Namespace, svc.Namespace)
	}
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil || sm.Spec.Selector.Size() == 0 || !sel.Matches(labels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor selector %v does not select the Service's labels %v (%v)", sm.Spec.Selector, svc.Labels, err)
	}
	if v := svc.Labels[sm.Spec.JobLabel]; sm.Spec.JobLabel == "" || v != "kube-convergence-exporter" {
		t.Errorf("ServiceMonitor jobLabel %q gives job %q, want kube-convergence-exporter (what the dashboards select)", sm.Spec.JobLabel, v)
	}
	if want := config.Default().SampleLimit(config.BudgetDefaultNamespaces); sm.Spec.SampleLimit == nil || *sm.Spec.SampleLimit != int64(want) {
		t.Errorf("ServiceMonitor sampleLimit %v, want %d: room for %d busy namespaces by the formula of docs/cardinality.md (config.Config.SampleLimit)", sm.Spec.SampleLimit, want, config.BudgetDefaultNamespaces)
	}
	if sm.Spec.ScrapeClassicHistograms == nil || !*sm.Spec.ScrapeClassicHistograms {
		t.Error("ServiceMonitor: want scrapeClassicHistograms: true (the rules and dashboards read classic le buckets)")
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor has %d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if !ep.HonorLabels {
		t.Error("ServiceMonitor endpoint without honorLabels: true: the operator's namespace/pod/container target labels would rename the exporter's to exported_namespace, ...")
	}
	if ep.Port != svc.Spec.Ports[0].Name {
		t.Errorf("ServiceMonitor endpoint port %q, the Service's port is %q", ep.Port, svc.Spec.Ports[0].Name)
	}
}

// checkWebConfig asserts that the exporter reads a web configuration from
// the mounted Secret and that the ServiceMonitor, if any, scrapes with TLS
// and basic auth from the same Secret.
func checkWebConfig(t *testing.T, objs []object) {
	t.Helper()
	d := workload(t, objs)
	c := d.Spec.Template.Spec.Containers[0]
	file := argFlags(c.Args)["web.config.file"]
	if file == "" {
		t.Fatalf("args %q: no --web.config.file", c.Args)
	}
	var secret string
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(file, m.MountPath+"/") {
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == m.Name && v.Secret != nil {
					secret = v.Secret.SecretName
					for _, want := range []string{filepath.Base(file), "tls.crt", "tls.key"} {
						if !slices.ContainsFunc(v.Secret.Items, func(k corev1.KeyToPath) bool { return k.Path == want }) {
							t.Errorf("web-config volume items %+v lack %s", v.Secret.Items, want)
						}
					}
				}
			}
		}
	}
	if secret == "" {
		t.Fatalf("--web.config.file=%s is not on a mounted Secret", file)
	}
	if fs := d.Spec.Template.Spec.SecurityContext.FSGroup; fs == nil || *fs != 65532 {
		t.Error("web-config: want fsGroup 65532, so that the nonroot user can read the mode-0440 key")
	}
	for _, o := range byKind(objs, "ServiceMonitor") {
		var sm monitoringv1.ServiceMonitor
		decode(t, o, &sm)
		ep := sm.Spec.Endpoints[0]
		if ep.Scheme == nil || strings.ToLower(string(*ep.Scheme)) != "https" {
			t.Errorf("ServiceMonitor scheme %v, want https", ep.Scheme)
		}
		if tc := ep.TLSConfig; tc == nil || tc.CA.Secret == nil || tc.CA.Secret.Name != secret || tc.ServerName == nil || *tc.ServerName == "" {
			t.Errorf("ServiceMonitor tlsConfig %+v: want the CA from Secret %s and a serverName", tc, secret)
		}
		if ba := ep.BasicAuth; ba == nil || ba.Username.Name != secret || ba.Password.Name != secret {
			t.Errorf("ServiceMonitor basicAuth %+v: want username and password from Secret %s", ba, secret)
		}
	}
}

// decode decodes strictly or fails the test.
func decode(t *testing.T, o object, into any) {
	t.Helper()
	if err := o.decodeInto(into); err != nil {
		t.Fatal(err)
	}
}

// argFlags maps "--name=value" arguments to name -> value.
func argFlags(args []string) map[string]string {
	out := map[string]string{}
	for _, a := range args {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			k, v, _ := strings.Cut(name, "=")
			out[k] = v
		}
	}
	return out
}

// flagPort returns the port of a --flag=[host]:port argument.
func flagPort(t *testing.T, flags map[string]string, name string) int32 {
	t.Helper()
	_, port, err := net.SplitHostPort(flags[name])
	if err != nil {
		t.Fatalf("--%s=%q: %v", name, flags[name], err)
	}
	n, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		t.Fatalf("--%s=%q: %v", name, flags[name], err)
	}
	return int32(n)
}

// workload returns the exporter's Deployment, or the StatefulSet of
// components/sharding as a Deployment of the same selector, replicas and
// pod template (what the checks read).
func workload(t *testing.T, objs []object) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	if sts := byKind(objs, "StatefulSet"); len(sts) > 0 {
		var s appsv1.StatefulSet
		decode(t, only(t, objs, "StatefulSet"), &s)
		if len(byKind(objs, "Deployment")) > 0 {
			t.Errorf("renders a Deployment besides the StatefulSet of shards")
		}
		d.ObjectMeta, d.Spec.Selector, d.Spec.Replicas, d.Spec.Template = s.ObjectMeta, s.Spec.Selector, s.Spec.Replicas, s.Spec.Template
		return &d
	}
	decode(t, only(t, objs, "Deployment"), &d)
	return &d
}
