package main

// `kce-scale cardinality` (make cardinality) measures the series budget of
// docs/cardinality.md: exporters with different label policies side by
// side on one kwok cluster, whose namespaces grow to each of
// CARD_NAMESPACES (default 10,100,1000), every namespace busy with the
// same mix of workloads, and at each size the series of every exporter by
// family: per namespace (the most any namespace has) and without one.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/prometheus/common/model"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

// A busy namespace: a Deployment of 2 replicas behind a Service (created,
// then a template change, then scaled to 3), a StatefulSet of 1 behind a
// headless Service, a DaemonSet on one node and a Job: every rollout kind
// and change, every pod owner kind, and endpoint propagation.
const cardAllowSize = 5 // namespaces in the allow-list variant

// cardNode is the node of namespace i's DaemonSet: spread over the nodes,
// as one node has room for podsPerNode pods only.
func cardNode(i, nodes int) string { return fmt.Sprintf("kwok-card-%02d", i%nodes) }

// variant is one exporter of the run: a label policy as config YAML, and
// whether Prometheus scrapes its native histograms.
type variant struct {
	name, config string
	native       bool
}

// cardVariants are the exporters CARD_VARIANTS may name (default: all).
var cardVariants = []variant{
	{name: "keep"},
	{name: "drop", config: "namespaceLabel:\n  mode: drop\n"},
	{name: "allowlist", config: "namespaceLabel:\n  mode: allowlist\n  allow: [" + strings.Join(cardNamespaces(0, cardAllowSize), ", ") + "]\n"},
	{name: "thresholds", config: "histograms:\n  classicBuckets: thresholds\n", native: true},
}

// pickVariants is the CARD_VARIANTS subset of cardVariants, in its order.
func pickVariants(v string) ([]variant, error) {
	if v == "" {
		return cardVariants, nil
	}
	var out []variant
	for _, name := range strings.Split(v, ",") {
		i := slices.IndexFunc(cardVariants, func(c variant) bool { return c.name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("CARD_VARIANTS: unknown variant %q (want some of %s)", name, variantNames(cardVariants))
		}
		out = append(out, cardVariants[i])
	}
	return out, nil
}

func cardNamespaces(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("card-%04d", i))
	}
	return out
}

// census is one scrape's series: by family, those with each namespace
// label value, and those without one.
type census struct {
	perNS  map[string]map[string]int // family -> namespace -> series
	noNS   map[string]int            // family -> series without a namespace label
	series int
	bytes  int
	stored int // series Prometheus holds (CARD_PROMETHEUS), 0 if not run
}

func (c census) families() []string {
	set := map[string]bool{}
	for f := range c.perNS {
		set[f] = true
	}
	for f := range c.noNS {
		set[f] = true
	}
	out := make([]string, 0, len(set))
	for f := range set {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// busiest is the most series any one namespace has in family.
func (c census) busiest(family string) int {
	n := 0
	for _, v := range c.perNS[family] {
		n = max(n, v)
	}
	return n
}

// takeCensus scrapes url and counts its sample lines by family, as the
// text format groups them under their # TYPE line.
func takeCensus(ctx context.Context, url string) (census, error) {
	c := census{perNS: map[string]map[string]int{}, noNS: map[string]int{}}
	family := ""
	n, _, err := scrape(ctx, url, func(l string) {
		if rest, ok := strings.CutPrefix(l, "# TYPE "); ok {
			family, _, _ = strings.Cut(rest, " ")
			return
		}
		if l == "" || l[0] == '#' {
			return
		}
		c.series++
		ns := labelValue(l, "namespace")
		if ns == "" {
			c.noNS[family]++
			return
		}
		if c.perNS[family] == nil {
			c.perNS[family] = map[string]int{}
		}
		c.perNS[family][ns]++
	})
	c.bytes = n
	return c, err
}

// labelValue is the value of label name in a sample line ("" without it);
// the exporter's namespace values need no unescaping.
func labelValue(line, name string) string {
	open := strings.IndexByte(line, '{')
	if open < 0 {
		return ""
	}
	labels := line[open+1:]
	for _, prefix := range []string{"{" + name + `="`, "," + name + `="`} {
		i := strings.Index("{"+labels, prefix)
		if i < 0 {
			continue
		}
		v := ("{" + labels)[i+len(prefix):]
		if j := strings.IndexByte(v, '"'); j >= 0 {
			return v[:j]
		}
	}
	return ""
}

func runCardinality() (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := configFromEnv()
	if err != nil {
		return err
	}
	sizes := []int{10, 100, 1000}
	if v := os.Getenv("CARD_NAMESPACES"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < cardAllowSize || (len(sizes) > 0 && n <= sizes[len(sizes)-1]) {
				return fmt.Errorf("CARD_NAMESPACES: want growing numbers of namespaces of at least %d such as 10,100,1000, got %q", cardAllowSize, v)
			}
			sizes = append(sizes, n)
		}
	}
	variants, err := pickVariants(os.Getenv("CARD_VARIANTS"))
	if err != nil {
		return err
	}
	withProm := os.Getenv("CARD_PROMETHEUS") != ""
	out := os.Getenv("CARD_OUT")
	if out == "" {
		out = "cardinality-result.md"
	}
	say := func(f string, a ...any) {
		fmt.Printf("%s "+f+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, a...)...)
	}
	scratch, err := os.MkdirTemp("", "kce-cardinality-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w (the exporters' logs are in %s)", err, scratch)
		}
	}()
	sb, err := sandbox.Start(ctx, sandbox.Options{
		BinDir:                 cfg.binDir,
		Stages:                 sandbox.StagesGeneral,
		ControllerManagerFlags: componentClientFlags,
		SchedulerFlags:         componentClientFlags,
		Logf:                   func(f string, a ...any) { say(f, a...) },
	})
	if err != nil {
		return err
	}
	defer func() { _ = sb.Stop() }()
	rc := sb.AdminConfig()
	rc.QPS, rc.Burst = 1000, 2000
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	// Room for 7 pods per namespace (a rolling update's surge included).
	nodes := (sizes[len(sizes)-1]*7+podsPerNode-1)/podsPerNode + 1
	if err := parallel(ctx, nodes, 8, func(i int) error { return sb.CreateNode(ctx, fmt.Sprintf("kwok-card-%02d", i)) }); err != nil {
		return err
	}
	var targets []*target
	defer func() {
		for _, t := range targets {
			t.stop()
		}
	}()
	var jobs []sandbox.ScrapeTarget
	for _, v := range variants {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		args := []string{"--kubeconfig=" + sb.Kubeconfig(""), "--web.listen-address=" + addr}
		if v.config != "" {
			file := filepath.Join(scratch, v.name+".yaml")
			if err := os.WriteFile(file, []byte(v.config), 0o600); err != nil {
				return err
			}
			args = append(args, "--config.file="+file)
		}
		t, err := startTarget(v.name, cfg.exporter, args, filepath.Join(scratch, v.name+".log"))
		if err != nil {
			return err
		}
		targets = append(targets, t)
		t.metricsURL = "http://" + addr + "/metrics"
		if err := waitHTTP(ctx, "http://"+addr+"/readyz", t); err != nil {
			return err
		}
		job := sandbox.ScrapeTarget{Job: v.name, Addr: addr, Extra: map[string]any{"scrape_native_histograms": v.native, "always_scrape_classic_histograms": true}}
		jobs = append(jobs, job)
	}
	say("%d exporters (%s) on %d kwok nodes", len(targets), variantNames(variants), nodes)
	// With CARD_PROMETHEUS, a real Prometheus scrapes them, each variant's
	// native histograms only where it sets native: the series it stores.
	var prom *sandbox.Prometheus
	if withProm {
		prom, err = sandbox.StartPrometheus(ctx, sandbox.PrometheusOptions{BinDir: cfg.binDir, ScrapeInterval: 15 * time.Second, Targets: jobs})
		if err != nil {
			return err
		}
		defer func() { _ = prom.Stop() }()
	}

	results := map[int][]census{}
	have := 0
	for _, n := range sizes {
		began := time.Now()
		nss := cardNamespaces(have, n)
		if err := createBusy(ctx, client, have, nss, nodes); err != nil {
			return err
		}
		if err := waitBusy(ctx, client, n, say); err != nil {
			return err
		}
		if err := changeBusy(ctx, client, nss, `{"spec":{"template":{"metadata":{"annotations":{"kce-card/revision":"2"}}}}}`); err != nil {
			return err
		}
		if err := waitBusy(ctx, client, n, say); err != nil {
			return err
		}
		if err := changeBusy(ctx, client, nss, `{"spec":{"replicas":3}}`); err != nil {
			return err
		}
		if err := waitBusy(ctx, client, n, say); err != nil {
			return err
		}
		have = n
		cs, err := settledCensus(ctx, targets, say)
		if err != nil {
			return err
		}
		if prom != nil {
			if err := storedSeries(ctx, prom, variants, cs); err != nil {
				return err
			}
		}
		results[n] = cs
		say("%d namespaces in %s: %s", n, duration(time.Since(began)), censusLine(variants, cs))
	}
	doc := cardinalityReport(exporterVersion(cfg.exporter), variants, sizes, results)
	if err := os.WriteFile(out, []byte(doc), 0o644); err != nil {
		return err
	}
	fmt.Print(doc)
	say("written to %s", out)
	return nil
}

func variantNames(vs []variant) string {
	var out []string
	for _, v := range vs {
		out = append(out, v.name)
	}
	return strings.Join(out, ", ")
}

func censusLine(vs []variant, cs []census) string {
	var out []string
	for i, c := range cs {
		out = append(out, fmt.Sprintf("%s %d series", vs[i].name, c.series))
	}
	return strings.Join(out, ", ")
}

// createBusy creates the namespaces nss, the first numbered from, and
// their workloads.
func createBusy(ctx context.Context, c kubernetes.Interface, from int, nss []string, nodes int) error {
	if err := parallel(ctx, len(nss), 8, func(i int) error {
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nss[i]}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("namespaces: %w", err)
	}
	ann := demo.Delays(podDelay, podDelay)
	return parallel(ctx, len(nss), 16, func(i int) error {
		ns := nss[i]
		web := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		db := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "db"}, Ports: []corev1.ServicePort{{Port: 5432}}}}
		one := int32(1)
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec: appsv1.StatefulSetSpec{Replicas: &one, ServiceName: "db",
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, Template: demo.PodTemplate("db", ann)}}
		agent := demo.PodTemplate("agent", ann)
		agent.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": cardNode(from+i, nodes)}
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}, Template: agent}}
		batch := demo.PodTemplate("batch", ann)
		batch.Spec.RestartPolicy = corev1.RestartPolicyNever
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "batch"}, Spec: batchv1.JobSpec{Template: batch}}
		return errors.Join(
			created(c.CoreV1().Services(ns).Create(ctx, web, metav1.CreateOptions{})),
			created(c.CoreV1().Services(ns).Create(ctx, db, metav1.CreateOptions{})),
			created(c.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "web", 2, ann), metav1.CreateOptions{})),
			created(c.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{})),
			created(c.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})),
			created(c.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})),
		)
	})
}

func created[T any](_ T, err error) error { return err }

func changeBusy(ctx context.Context, c kubernetes.Interface, nss []string, patch string) error {
	return parallel(ctx, len(nss), 16, func(i int) error {
		_, err := c.AppsV1().Deployments(nss[i]).Patch(ctx, "web", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	})
}

// waitBusy waits until the n namespaces' Deployments, StatefulSets and
// DaemonSets are rolled out.
func waitBusy(ctx context.Context, c kubernetes.Interface, n int, say func(string, ...any)) error {
	return waitFor(ctx, 10*time.Minute+time.Duration(n)*time.Second, "the workloads rolled out", func() (bool, string, error) {
		deps, err := c.AppsV1().Deployments("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, "", err
		}
		stss, err := c.AppsV1().StatefulSets("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, "", err
		}
		dss, err := c.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, "", err
		}
		done := 0
		for i := range deps.Items {
			d := &deps.Items[i]
			want := *d.Spec.Replicas
			if d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == want && d.Status.AvailableReplicas == want && d.Status.Replicas == want {
				done++
			}
		}
		for i := range stss.Items {
			s := &stss.Items[i]
			if s.Status.ObservedGeneration == s.Generation && s.Status.ReadyReplicas == *s.Spec.Replicas && s.Status.UpdatedReplicas == *s.Spec.Replicas {
				done++
			}
		}
		for i := range dss.Items {
			d := &dss.Items[i]
			if d.Status.ObservedGeneration == d.Generation && d.Status.DesiredNumberScheduled == 1 && d.Status.NumberAvailable == 1 {
				done++
			}
		}
		return done == 3*n && len(deps.Items) == n, fmt.Sprintf("%d of %d", done, 3*n), nil
	}, 2*time.Second, say)
}

// settledCensus scrapes every exporter until its series count is the same
// twice 15 s apart (the pods' endpoint and startup series follow the
// rollouts by seconds).
func settledCensus(ctx context.Context, targets []*target, say func(string, ...any)) ([]census, error) {
	out := make([]census, len(targets))
	for i, t := range targets {
		last := -1
		if err := waitFor(ctx, 5*time.Minute, t.name+" series settled", func() (bool, string, error) {
			c, err := takeCensus(ctx, t.metricsURL)
			if err != nil {
				return false, "", errors.Join(err, t.exited())
			}
			settled := c.series == last
			last, out[i] = c.series, c
			return settled, fmt.Sprintf("%d series", c.series), nil
		}, 15*time.Second, say); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// cardinalityReport is the markdown of the run: for each family, the keep
// variant's series per busy namespace and without a namespace, and every
// variant's total at each size.
func cardinalityReport(version string, variants []variant, sizes []int, results map[int][]census) string {
	var b strings.Builder
	largest := results[sizes[len(sizes)-1]]
	keep := largest[0]
	fmt.Fprintf(&b, "Series by family, %s; every namespace busy (a Deployment of 2 then 3 replicas behind a Service, created, template-changed and scaled; a StatefulSet of 1 behind a headless Service; a DaemonSet on one node; a Job). Per namespace: the most series one namespace has in the default config (`keep`); fixed: series without a namespace label.\n\n", version)
	b.WriteString("| family | per namespace (keep) | fixed (keep) |")
	for _, n := range sizes {
		for _, v := range variants {
			fmt.Fprintf(&b, " %s, %d ns |", v.name, n)
		}
	}
	b.WriteString("\n| --- | --- | --- |" + strings.Repeat(" --- |", len(sizes)*len(variants)) + "\n")
	total := func(c census, f string) int {
		n := c.noNS[f]
		for _, v := range c.perNS[f] {
			n += v
		}
		return n
	}
	sumBusy, sumFixed := 0, 0
	for _, f := range keep.families() {
		if !strings.HasPrefix(f, "kube_convergence_") {
			continue
		}
		sumBusy += keep.busiest(f)
		sumFixed += keep.noNS[f]
		fmt.Fprintf(&b, "| `%s` | %d | %d |", strings.TrimPrefix(f, "kube_convergence_"), keep.busiest(f), keep.noNS[f])
		for _, n := range sizes {
			for _, c := range results[n] {
				fmt.Fprintf(&b, " %d |", total(c, f))
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "| **all `kube_convergence_*`** | **%d** | **%d** |", sumBusy, sumFixed)
	for _, n := range sizes {
		for _, c := range results[n] {
			s := 0
			for _, f := range c.families() {
				if strings.HasPrefix(f, "kube_convergence_") {
					s += total(c, f)
				}
			}
			fmt.Fprintf(&b, " **%d** |", s)
		}
	}
	b.WriteString("\n| every series of /metrics (go_, process_ too) | | |")
	for _, n := range sizes {
		for _, c := range results[n] {
			fmt.Fprintf(&b, " %d |", c.series)
		}
	}
	b.WriteString("\n| /metrics bytes | | |")
	for _, n := range sizes {
		for _, c := range results[n] {
			fmt.Fprintf(&b, " %d |", c.bytes)
		}
	}
	b.WriteString("\n")
	if results[sizes[0]][0].stored > 0 {
		b.WriteString("| series Prometheus stored (`kube_convergence_*`; native histograms scraped for: " + nativeNames(variants) + ") | | |")
		for _, n := range sizes {
			for _, c := range results[n] {
				fmt.Fprintf(&b, " %d |", c.stored)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func nativeNames(vs []variant) string {
	var out []string
	for _, v := range vs {
		if v.native {
			out = append(out, v.name)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// storedSeries waits for two scrapes of every variant after the census
// and reads the series Prometheus holds of each job.
func storedSeries(ctx context.Context, prom *sandbox.Prometheus, vs []variant, cs []census) error {
	since := time.Now()
	for i, v := range vs {
		q := fmt.Sprintf(`count({job=%q, __name__=~"kube_convergence_.+"})`, v.name)
		// A scrape that began 30 s after since: the second one after it.
		if _, err := prom.WaitFor(ctx, fmt.Sprintf(`timestamp(up{job=%q}) > %d`, v.name, since.Add(30*time.Second).Unix()), func(vec model.Vector) bool { return len(vec) > 0 }, 2*time.Minute); err != nil {
			return fmt.Errorf("prometheus: two scrapes of %s: %w", v.name, err)
		}
		vec, err := prom.Query(ctx, q)
		if err != nil {
			return fmt.Errorf("prometheus: %s: %w", q, err)
		}
		if len(vec) != 1 {
			return fmt.Errorf("prometheus: %s: %d results, want 1", q, len(vec))
		}
		cs[i].stored = int(vec[0].Value)
	}
	return nil
}

// exporterVersion is the measured binary's --version line.
func exporterVersion(bin string) string {
	out, err := exec.CommandContext(context.Background(), bin, "--version").CombinedOutput()
	if err != nil {
		return "(version unknown)"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return "`" + strings.TrimSpace(line) + "`"
}
