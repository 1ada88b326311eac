package manifests

// Tests of the files of the kustomize base (deploy/base) and of the
// prometheus-operator component: every file parses, has the kind and name
// the others refer to, the pod is locked down, the names that tie
// Deployment, Service and ServiceMonitor together agree, and the Deployment
// only passes flags the binary has. The rendered overlays and the Helm
// chart are tested in package deploy.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const (
	baseNamespace = "kube-convergence"
	exporterName  = "kube-convergence-exporter"
	metricsPort   = "http-metrics"
	probesPort    = "http-probes"
	nonRootID     = int64(65532) // distroless "nonroot"
)

var (
	baseDir           = filepath.Join(repoRoot, "deploy", "base")
	operatorComponent = filepath.Join(repoRoot, "deploy", "components", "prometheus-operator")
)

// baseFiles is every file deploy/base must contain, with what it holds. A
// new file needs an entry here (and in kustomization.yaml).
var baseFiles = map[string]struct{ apiVersion, kind, name, namespace string }{
	"kustomization.yaml":      {"kustomize.config.k8s.io/v1beta1", "Kustomization", "", ""},
	"serviceaccount.yaml":     {"v1", "ServiceAccount", exporterName, baseNamespace},
	"clusterrole.yaml":        {"rbac.authorization.k8s.io/v1", "ClusterRole", ClusterRoleName, ""},
	"clusterrolebinding.yaml": {"rbac.authorization.k8s.io/v1", "ClusterRoleBinding", exporterName, ""},
	"deployment.yaml":         {"apps/v1", "Deployment", exporterName, baseNamespace},
	"service.yaml":            {"v1", "Service", exporterName, baseNamespace},
}

// readDoc parses one single-document YAML file of deploy/base into a
// JSON-compatible tree.
func readDoc(t *testing.T, file string) map[string]any {
	t.Helper()
	return readDocIn(t, baseDir, file)
}

// readDocIn is readDoc for a file of another directory.
func readDocIn(t *testing.T, dir, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := splitYAML(b)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(docs) != 1 {
		t.Fatalf("%s: %d YAML documents, want 1", file, len(docs))
	}
	return docs[0]
}

// splitYAML parses every document of a YAML stream.
func splitYAML(b []byte) ([]map[string]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

// decodeStrict converts a parsed document into a typed object through JSON,
// failing on any field the type does not have: a misspelt field would be
// silently dropped by the API server's decoder (with a warning at best).
func decodeStrict(t *testing.T, doc map[string]any, into any) {
	t.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("decode %T: %v", into, err)
	}
}

// decodeLoose is decodeStrict for types we only model in part (the
// ServiceMonitor CRD, the Kustomization).
func decodeLoose(t *testing.T, doc map[string]any, into any) {
	t.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("decode %T: %v", into, err)
	}
}

func TestBaseFilesKindsAndNames(t *testing.T) {
	entries, err := os.ReadDir(baseDir)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range entries {
		found = append(found, e.Name())
		want, ok := baseFiles[e.Name()]
		if !ok {
			t.Errorf("deploy/base/%s: unexpected file (add it to baseFiles in this test and to kustomization.yaml)", e.Name())
			continue
		}
		doc := readDoc(t, e.Name())
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		decodeLoose(t, doc, &meta)
		got := struct{ apiVersion, kind, name, namespace string }{meta.APIVersion, meta.Kind, meta.Metadata.Name, meta.Metadata.Namespace}
		if got != want {
			t.Errorf("deploy/base/%s: got %+v, want %+v", e.Name(), got, want)
		}
		if obj := typedObject(want.kind); obj != nil {
			decodeStrict(t, doc, obj)
		}
	}
	for name := range baseFiles {
		if !slices.Contains(found, name) {
			t.Errorf("deploy/base/%s is missing", name)
		}
	}
}

// typedObject returns an empty object of a built-in kind, nil for others.
func typedObject(kind string) any {
	switch kind {
	case "ServiceAccount":
		return &corev1.ServiceAccount{}
	case "Service":
		return &corev1.Service{}
	case "ClusterRole":
		return &rbacv1.ClusterRole{}
	case "ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}
	case "Deployment":
		return &appsv1.Deployment{}
	}
	return nil
}

// kustomization is the part of a Kustomization this test reads.
type kustomization struct {
	Namespace string   `json:"namespace"`
	Resources []string `json:"resources"`
	Labels    []struct {
		Pairs            map[string]string `json:"pairs"`
		IncludeSelectors bool              `json:"includeSelectors"`
		IncludeTemplates bool              `json:"includeTemplates"`
	} `json:"labels"`
}

func TestKustomizationListsEveryFile(t *testing.T) {
	var k kustomization
	decodeLoose(t, readDoc(t, "kustomization.yaml"), &k)
	if k.Namespace != baseNamespace {
		t.Errorf("kustomization namespace %q, want %q", k.Namespace, baseNamespace)
	}
	entries, err := os.ReadDir(baseDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "kustomization.yaml" && !slices.Contains(k.Resources, e.Name()) {
			t.Errorf("deploy/base/%s is not listed in kustomization.yaml resources", e.Name())
		}
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join(baseDir, r)); err != nil {
			t.Errorf("kustomization.yaml lists %s: %v", r, err)
		}
	}
	if len(k.Labels) == 0 || k.Labels[0].Pairs["app.kubernetes.io/name"] != exporterName {
		t.Errorf("kustomization.yaml: want common labels with app.kubernetes.io/name=%s, got %+v", exporterName, k.Labels)
	}
	for _, l := range k.Labels {
		if l.IncludeSelectors {
			t.Errorf("kustomization.yaml labels %v: includeSelectors would change the Deployment's immutable selector when a label is added", l.Pairs)
		}
	}
}

func TestClusterRoleBinding(t *testing.T) {
	var b rbacv1.ClusterRoleBinding
	decodeStrict(t, readDoc(t, "clusterrolebinding.yaml"), &b)
	if b.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: ClusterRoleName}) {
		t.Errorf("roleRef %+v, want the ClusterRole %s", b.RoleRef, ClusterRoleName)
	}
	want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: exporterName, Namespace: baseNamespace}}
	if !slices.Equal(b.Subjects, want) {
		t.Errorf("subjects %+v, want %+v", b.Subjects, want)
	}
	var r rbacv1.ClusterRole
	decodeStrict(t, readDoc(t, "clusterrole.yaml"), &r)
	for _, rule := range r.Rules {
		for _, v := range rule.Verbs {
			if !slices.Contains(readVerbs, v) {
				t.Errorf("ClusterRole rule %+v grants %q: the exporter only reads", rule, v)
			}
		}
	}
}

func readDeployment(t *testing.T) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	var d appsv1.Deployment
	decodeStrict(t, readDoc(t, "deployment.yaml"), &d)
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("Deployment has %d containers, want 1", n)
	}
	return &d, &d.Spec.Template.Spec.Containers[0]
}

func TestDeploymentSecurityContext(t *testing.T) {
	d, c := readDeployment(t)
	pod := d.Spec.Template.Spec
	ps := pod.SecurityContext
	if ps == nil {
		t.Fatal("Deployment: no pod securityContext")
	}
	if ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Error("pod securityContext: want runAsNonRoot: true")
	}
	if ps.RunAsUser == nil || *ps.RunAsUser != nonRootID {
		t.Errorf("pod securityContext: want runAsUser: %d", nonRootID)
	}
	if ps.RunAsGroup == nil || *ps.RunAsGroup != nonRootID {
		t.Errorf("pod securityContext: want runAsGroup: %d", nonRootID)
	}
	if ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod securityContext: want seccompProfile.type: RuntimeDefault")
	}
	cs := c.SecurityContext
	if cs == nil {
		t.Fatal("container: no securityContext")
	}
	if cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem {
		t.Error("container securityContext: want readOnlyRootFilesystem: true")
	}
	if cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation {
		t.Error("container securityContext: want allowPrivilegeEscalation: false")
	}
	if cs.Capabilities == nil || !slices.Equal(cs.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(cs.Capabilities.Add) > 0 {
		t.Error("container securityContext: want capabilities drop [ALL] and nothing added")
	}
	if cs.Privileged != nil && *cs.Privileged {
		t.Error("container securityContext: privileged")
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Error("pod shares a host namespace")
	}
	if pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
		t.Error("pod: want automountServiceAccountToken: true (the exporter lists and watches with it)")
	}
	if pod.ServiceAccountName != exporterName {
		t.Errorf("pod serviceAccountName %q, want %q", pod.ServiceAccountName, exporterName)
	}
}

func TestDeploymentShape(t *testing.T) {
	d, c := readDeployment(t)
	pod := d.Spec.Template.Spec
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Error("Deployment: want replicas: 1")
	}
	if pod.PriorityClassName != "" {
		t.Errorf("priorityClassName %q: leave it to the cluster operator", pod.PriorityClassName)
	}
	if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds != 30 {
		t.Error("want terminationGracePeriodSeconds: 30")
	}
	if !strings.HasPrefix(c.Image, "ghcr.io/kube-convergence/kube-convergence-exporter") {
		t.Errorf("image %q", c.Image)
	}
	sel := d.Spec.Selector.MatchLabels
	if sel["app.kubernetes.io/name"] != exporterName {
		t.Errorf("selector %v: want app.kubernetes.io/name=%s", sel, exporterName)
	}
	for k, v := range sel {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("selector label %s=%s is not on the pod template", k, v)
		}
	}

	if len(c.Ports) != 2 || c.Ports[0].Name != metricsPort || c.Ports[0].ContainerPort != 10329 ||
		c.Ports[1].Name != probesPort || c.Ports[1].ContainerPort != 10330 {
		t.Errorf("container ports %+v, want %s: 10329 and %s: 10330", c.Ports, metricsPort, probesPort)
	}
	if !slices.Contains(c.Args, "--web.listen-address=:10329") {
		t.Errorf("args %q: want --web.listen-address=:10329 (the container port)", c.Args)
	}
	if !slices.Contains(c.Args, "--web.probe-address=:10330") {
		t.Errorf("args %q: want --web.probe-address=:10330 (the probes' port, never behind TLS or basic auth)", c.Args)
	}

	want := map[string]map[corev1.ResourceName]string{
		"requests": {corev1.ResourceCPU: "50m", corev1.ResourceMemory: "128Mi"},
		"limits":   {corev1.ResourceMemory: "512Mi"},
	}
	got := map[string]corev1.ResourceList{"requests": c.Resources.Requests, "limits": c.Resources.Limits}
	for kind, w := range want {
		if len(got[kind]) != len(w) {
			t.Errorf("resources.%s %s, want exactly %v", kind, quantities(got[kind]), w)
		}
		for name, q := range w {
			have, ok := got[kind][name]
			if !ok || have.Cmp(resource.MustParse(q)) != 0 {
				t.Errorf("resources.%s.%s = %v, want %s", kind, name, have.String(), q)
			}
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Error("CPU limit set: throttling delays watch events and inflates the latencies the exporter measures")
	}

	for name, p := range map[string]*corev1.Probe{"startupProbe": c.StartupProbe, "livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe", name)
			continue
		}
		wantPath := "/healthz"
		if name == "readinessProbe" {
			wantPath = "/readyz"
		}
		if p.HTTPGet.Path != wantPath || p.HTTPGet.Port.String() != probesPort || p.HTTPGet.Scheme != "" {
			t.Errorf("%s: httpGet %s %s on port %s, want plain HTTP %s on %s", name, p.HTTPGet.Scheme, p.HTTPGet.Path, p.HTTPGet.Port.String(), wantPath, probesPort)
		}
	}
	if p := c.StartupProbe; p != nil {
		if budget := p.PeriodSeconds * p.FailureThreshold; budget < 120 {
			t.Errorf("startupProbe allows %ds, want a generous budget (>= 120s)", budget)
		}
	}
}

// quantities prints a ResourceList readably ("cpu=1 memory=512Mi").
func quantities(l corev1.ResourceList) string {
	var parts []string
	for name, q := range l {
		parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// serviceMonitor is the part of the ServiceMonitor CRD this test reads.
type serviceMonitor struct {
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		NamespaceSelector *struct{} `json:"namespaceSelector"`
		Endpoints         []struct {
			Port        string `json:"port"`
			Path        string `json:"path"`
			Interval    string `json:"interval"`
			HonorLabels bool   `json:"honorLabels"`
		} `json:"endpoints"`
		ScrapeClassicHistograms *bool `json:"scrapeClassicHistograms"`
	} `json:"spec"`
}

func TestServiceMonitorMatchesService(t *testing.T) {
	d, c := readDeployment(t)
	var svc corev1.Service
	decodeStrict(t, readDoc(t, "service.yaml"), &svc)
	var sm serviceMonitor
	decodeLoose(t, readDocIn(t, operatorComponent, "servicemonitor.yaml"), &sm)

	if svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("Service type %q, want ClusterIP", svc.Spec.Type)
	}
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("Service has %d ports, want 1", len(svc.Spec.Ports))
	}
	sp := svc.Spec.Ports[0]
	if sp.Name != metricsPort || sp.Port != 10329 || sp.TargetPort.String() != c.Ports[0].Name {
		t.Errorf("Service port %+v, want %s: 10329 -> container port %s", sp, metricsPort, c.Ports[0].Name)
	}
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not match the pod template labels %v", k, v, d.Spec.Template.Labels)
		}
	}

	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor has %d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != sp.Name {
		t.Errorf("ServiceMonitor endpoint port %q, but the Service's port is named %q", ep.Port, sp.Name)
	}
	if ep.Interval != "30s" {
		t.Errorf("ServiceMonitor interval %q, want 30s", ep.Interval)
	}
	if len(sm.Spec.Selector.MatchLabels) == 0 {
		t.Error("ServiceMonitor selects no labels")
	}
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selector %s=%s does not match the Service's own labels %v", k, v, svc.Labels)
		}
	}
	if sm.Spec.NamespaceSelector != nil {
		t.Error("ServiceMonitor has a namespaceSelector: it would keep naming the base's namespace after an overlay moves the Service")
	}
	if !ep.HonorLabels {
		t.Error("ServiceMonitor endpoint: want honorLabels: true (else the exporter's namespace label becomes exported_namespace)")
	}
	if sm.Spec.ScrapeClassicHistograms == nil || !*sm.Spec.ScrapeClassicHistograms {
		t.Error("ServiceMonitor: want spec.scrapeClassicHistograms: true (the rules use le buckets)")
	}
}

// flagLine matches a flag in kingpin's help: "  -h, --[no-]help" or
// "      --web.listen-address=:10329"; continuation lines are indented more.
var flagLine = regexp.MustCompile(`(?m)^  (?:-\w, |    )--(?:\[no-\])?([A-Za-z0-9][\w.-]*)`)

// TestDeploymentArgsAreRealFlags builds the binary and checks that the
// Deployment's arguments name flags it has and that it accepts them.
func TestDeploymentArgsAreRealFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary (about 10s warm); skipped with -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH")
	}
	bin := filepath.Join(t.TempDir(), "kube-convergence-exporter")
	build := exec.CommandContext(t.Context(), goTool, "build", "-o", bin, "./cmd/kube-convergence-exporter")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	_, c := readDeployment(t)

	help, err := exec.CommandContext(t.Context(), bin, "serve", "--help").Output()
	if err != nil {
		t.Fatalf("serve --help: %v", err)
	}
	known := map[string]bool{}
	for _, m := range flagLine.FindAllSubmatch(help, -1) {
		known[string(m[1])] = true
	}
	if !known["web.listen-address"] || !known["log.format"] {
		t.Fatalf("could not read the flags from serve --help (found %v):\n%s", known, help)
	}
	for _, a := range c.Args {
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			t.Errorf("arg %q is not a --flag (serve is the default command)", a)
			continue
		}
		name, _, _ = strings.Cut(name, "=")
		if !known[name] && !known[strings.TrimPrefix(name, "no-")] {
			t.Errorf("arg %q: the binary has no flag --%s", a, name)
		}
	}

	// Values too: run with the Deployment's args and a kubeconfig that does
	// not exist. Flags parse (exit 2 and "see --help" on a bad flag or
	// value), then serve fails on the kubeconfig before it listens.
	args := append(slices.Clone(c.Args), "--kubeconfig="+filepath.Join(t.TempDir(), "missing"))
	run := exec.CommandContext(t.Context(), bin, args...)
	var stderr bytes.Buffer
	run.Stderr = &stderr
	err = run.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(stderr.String(), "kubeconfig") {
		t.Errorf("%s %s: want exit 1 on the missing kubeconfig (flags accepted), got %v:\n%s", bin, strings.Join(args, " "), err, stderr.String())
	}
}
