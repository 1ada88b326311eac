package sandbox

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// shared is the one full sandbox of this test binary (kwok StagesGeneral),
// started by TestMain; nil in -short mode.
var shared *Sandbox

// scratch records every scratch dir the tests start processes in, so that
// TestMain can check after the run that no process survived.
var scratch struct {
	sync.Mutex
	dirs []string
}

func track(dir string) {
	scratch.Lock()
	defer scratch.Unlock()
	scratch.dirs = append(scratch.dirs, dir)
}

const (
	sharedUser = "viewer"
	nodeName   = "kwok-node-0"
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	if dir := os.Getenv(orphanEnv); dir != "" {
		return orphanChild(dir)
	}
	if testing.Short() {
		// Every test skips itself with the reason.
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	begin := time.Now()
	s, err := Start(ctx, Options{Stages: StagesGeneral, Users: []string{sharedUser}, Logf: log.Printf})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	track(s.Dir())
	if err := s.CreateNode(ctx, nodeName); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = s.Stop()
		return 1
	}
	log.Printf("shared sandbox with node %s ready in %s", nodeName, time.Since(begin).Round(time.Millisecond))
	shared = s

	code := m.Run()

	begin = time.Now()
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	log.Printf("shared sandbox stopped in %s", time.Since(begin).Round(time.Millisecond))
	if _, err := os.Stat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "sandbox dir %s still exists after Stop (%v)\n", s.Dir(), err)
		code = 1
	}
	if leaks := survivors(scratch.dirs); len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "processes still running after Stop:\n%s\n", strings.Join(leaks, "\n"))
		code = 1
	}
	return code
}

// survivors lists running processes whose command line mentions one of dirs.
func survivors(dirs []string) []string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return []string{fmt.Sprintf("reading /proc: %v", err)}
	}
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue // exited meanwhile
		}
		cmdline := strings.ReplaceAll(string(b), "\x00", " ")
		for _, d := range dirs {
			if strings.Contains(cmdline, d) {
				out = append(out, fmt.Sprintf("pid %d: %.300s", pid, cmdline))
			}
		}
	}
	return out
}

// orphanEnv makes the test binary act as TestOrphansDie's child: start a
// sandbox in the given dir, say "ready", and wait to be killed.
const orphanEnv = "KCE_SANDBOX_ORPHAN_DIR"

func orphanChild(dir string) int {
	s, err := Start(context.Background(), Options{Dir: dir, Only: []Component{Etcd}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("ready %d\n", s.procs[Etcd].pid())
	select {}
}

// needShared skips in -short mode and returns the shared sandbox.
func needShared(t *testing.T) *Sandbox {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok); skipped with -short")
	}
	return shared
}

func clientset(t *testing.T, s *Sandbox) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// createNamespace creates ns and waits for its default ServiceAccount, which
// the ServiceAccount admission plugin needs before it admits a pod there.
func createNamespace(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("default service account of %s: %v", ns, err)
	}
}

// exactDelays are pod annotations that make kwok's general stages wait
// exactly the given time (jitter equal to the delay, see Stages).
func exactDelays(create, ready string) map[string]string {
	return map[string]string{
		"pod-create.stage.kwok.x-k8s.io/delay":        create,
		"pod-create.stage.kwok.x-k8s.io/jitter-delay": create,
		"pod-ready.stage.kwok.x-k8s.io/delay":         ready,
		"pod-ready.stage.kwok.x-k8s.io/jitter-delay":  ready,
	}
}

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{
		NodeSelector: map[string]string{"type": "kwok"},
		Containers:   []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
	}
}

func TestCredentials(t *testing.T) {
	s := needShared(t)
	ctx := t.Context()

	// The kubeconfig files load with clientcmd, as the exporter binary will.
	adminCfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig(""))
	if err != nil {
		t.Fatalf("load admin kubeconfig: %v", err)
	}
	admin := kubernetes.NewForConfigOrDie(adminCfg)
	if _, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err != nil {
		t.Fatalf("admin via kubeconfig: %v", err)
	}

	userCfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig(sharedUser))
	if err != nil {
		t.Fatalf("load user kubeconfig: %v", err)
	}
	for name, cfg := range map[string]*rest.Config{"UserConfig": s.UserConfig(sharedUser), "Kubeconfig": userCfg} {
		user := kubernetes.NewForConfigOrDie(cfg)
		review, err := user.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: self subject review: %v", name, err)
		}
		if got := review.Status.UserInfo; got.Username != sharedUser || strings.Join(got.Groups, ",") != "system:authenticated" {
			t.Errorf("%s: user info = %+v, want %s in system:authenticated only", name, got, sharedUser)
		}
		if _, err := user.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s: listing pods as %s: err = %v, want Forbidden", name, sharedUser, err)
		}
	}
}

// TestDeploymentConverges is the end-to-end chain the exporter measures:
// Deployment -> ReplicaSet -> scheduled Pods -> kwok makes them Ready -> the
// EndpointSlice controller publishes 3 ready endpoints.
func TestDeploymentConverges(t *testing.T) {
	s := needShared(t)
	ctx := t.Context()
	cs := clientset(t, s)
	const ns = "converge"
	createNamespace(ctx, t, cs, ns)

	labels := map[string]string{"app": "web"}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	replicas := int32(3)
	spec := podSpec()
	spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080}}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				// Exact delays instead of the stock random 1-5 s per stage.
				// Ready must come at least 1 s after pod-create's Ready=False:
				// the EndpointSlice controller compares the Ready condition's
				// lastTransitionTime (1 s precision) with the one it saw last,
				// and leaves endpoints.kubernetes.io/last-change-trigger-time
				// off the slice when both fall in the same second (seen with
				// 200 ms + 200 ms).
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: exactDelays("200ms", "1s")},
				Spec:       spec,
			},
		},
	}
	begin := time.Now()
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, sl := range slices.Items {
			ready := 0
			for _, ep := range sl.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					ready++
				}
			}
			trigger := sl.Annotations[corev1.EndpointsLastChangeTriggerTime]
			last = fmt.Sprintf("slice %s: %d ready of %d, trigger time %q", sl.Name, ready, len(sl.Endpoints), trigger)
			if ready == 3 && trigger != "" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("EndpointSlice of service web: %v; last seen: %s", err, last)
	}
	t.Logf("deployment created -> 3 ready endpoints with trigger time in %s (%s)", time.Since(begin).Round(time.Millisecond), last)

	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.ObservedGeneration != d.Generation {
		// The deployment controller may lag the endpoint slice by a sync.
		t.Logf("deployment observedGeneration %d of generation %d", d.Status.ObservedGeneration, d.Generation)
	}
}

// podTimes records when this test's informer received a pod's transitions.
type podTimes struct {
	added, initialized, ready time.Time
}

// TestKwokDelays checks that pod delay annotations shape the timeline as
// documented: pod-create 1 s and pod-ready 2 s give Initialized 1 s and
// Ready 3 s after creation, measured with the informer's receive times.
func TestKwokDelays(t *testing.T) {
	s := needShared(t)
	ctx := t.Context()
	cs := clientset(t, s)
	const ns = "delays"
	createNamespace(ctx, t, cs, ns)

	var (
		mu    sync.Mutex
		times = map[string]*podTimes{}
	)
	observe := func(obj any) {
		now := time.Now()
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		pt := times[pod.Name]
		if pt == nil {
			pt = &podTimes{added: now}
			times[pod.Name] = pt
		}
		for _, c := range pod.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch {
			case c.Type == corev1.PodInitialized && pt.initialized.IsZero():
				pt.initialized = now
			case c.Type == corev1.PodReady && pt.ready.IsZero():
				pt.ready = now
			}
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	// Shutdown waits for the informer, which stops only when its stop
	// channel closes: cancel first (defers run last-in first-out).
	stop, cancel := context.WithCancel(ctx)
	defer factory.Shutdown()
	defer cancel()
	factory.Start(stop.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("pod informer did not sync")
	}

	const pods = 3
	for i := range pods {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("delayed-%d", i), Annotations: exactDelays("1s", "2s")},
			Spec:       podSpec(),
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		done := 0
		for _, pt := range times {
			if !pt.ready.IsZero() {
				done++
			}
		}
		return done == pods, nil
	})
	if err != nil {
		t.Fatalf("pods not ready: %v", err)
	}

	// 300 ms covers scheduling (tens of ms), kwok's reaction and the watch
	// delivery (a client-go v0.37.2 informer gets an update 4.5 ms p99
	// after the write on this idle sandbox, 9.6 ms p99 under load).
	const tolerance = 300 * time.Millisecond
	mu.Lock()
	defer mu.Unlock()
	for name, pt := range times {
		init, ready := pt.initialized.Sub(pt.added), pt.ready.Sub(pt.added)
		t.Logf("%s: Initialized after %s, Ready after %s (want 1s and 3s)", name, init.Round(time.Millisecond), ready.Round(time.Millisecond))
		if d := init - time.Second; d < -tolerance || d > tolerance {
			t.Errorf("%s: Initialized after %s, want 1s ± %s", name, init, tolerance)
		}
		if d := ready - 3*time.Second; d < -tolerance || d > tolerance {
			t.Errorf("%s: Ready after %s, want 3s ± %s", name, ready, tolerance)
		}
	}
}

// configMapWatcher is an informer on ConfigMaps in the default namespace.
type configMapWatcher struct {
	store cache.Store
}

func watchConfigMaps(t *testing.T, cs kubernetes.Interface) *configMapWatcher {
	t.Helper()
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	inf := factory.Core().V1().ConfigMaps().Informer()
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
		t.Fatal("configmap informer did not sync")
	}
	return &configMapWatcher{store: inf.GetStore()}
}

// waitSees waits until the informer's store holds every named ConfigMap.
func (w *configMapWatcher) waitSees(t *testing.T, what string, names ...string) {
	t.Helper()
	begin := time.Now()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		for _, n := range names {
			if _, ok, _ := w.store.GetByKey("default/" + n); !ok {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s: informer never saw %v: %v", what, names, err)
	}
	t.Logf("%s: informer saw %v after %s", what, names, time.Since(begin).Round(time.Millisecond))
}

// createConfigMap creates a ConfigMap, retrying while the apiserver or etcd
// is still coming back, and returns its resourceVersion.
func createConfigMap(t *testing.T, cs kubernetes.Interface, name string) string {
	t.Helper()
	var rv string
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		rv = cm.ResourceVersion
		return true, nil
	})
	if err != nil {
		t.Fatalf("create configmap %s: %v (last: %v)", name, err, last)
	}
	return rv
}

// TestSecondSandbox starts a small second sandbox (etcd and apiserver only,
// watch cache off) next to the shared one, and breaks it in the ways the
// exporter must survive: apiserver restart, etcd restart, a cut and a paused
// network path, and a compaction that turns a watch into 410 Gone.
func TestSecondSandbox(t *testing.T) {
	needShared(t)
	begin := time.Now()
	s := StartT(t, Options{
		Only: []Component{Etcd, APIServer},
		// Watches read etcd directly, so a compaction yields a real 410.
		APIServerFlags: []string{"--watch-cache=false"},
	})
	track(s.Dir())
	t.Logf("second sandbox ready in %s", time.Since(begin).Round(time.Millisecond))
	if s.APIServerURL() == shared.APIServerURL() || s.Dir() == shared.Dir() {
		t.Fatalf("second sandbox shares %s / %s with the first", s.APIServerURL(), s.Dir())
	}
	cs := clientset(t, s)
	// Both control planes answer side by side.
	for name, c := range map[string]kubernetes.Interface{"shared": clientset(t, shared), "second": cs} {
		if _, err := c.Discovery().ServerVersion(); err != nil {
			t.Fatalf("%s sandbox: %v", name, err)
		}
	}
	if _, err := cs.CoreV1().Nodes().Get(t.Context(), nodeName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("second sandbox sees the shared sandbox's node: err = %v", err)
	}

	proxy, err := s.NewProxy()
	if err != nil {
		t.Fatal(err)
	}
	// The proxied client is built from the proxy's kubeconfig file, which
	// also checks that the certificate verifies on the proxy's port.
	proxyCfg, err := clientcmd.BuildConfigFromFlags("", proxy.Kubeconfig(""))
	if err != nil {
		t.Fatalf("load proxy kubeconfig: %v", err)
	}
	if want := proxy.Config(s.AdminConfig()).Host; proxyCfg.Host != want {
		t.Fatalf("proxy kubeconfig points at %s, Proxy.Config at %s", proxyCfg.Host, want)
	}
	viaProxy := kubernetes.NewForConfigOrDie(proxyCfg)
	direct := watchConfigMaps(t, cs)
	proxied := watchConfigMaps(t, viaProxy)

	t.Run("apiserver restart", func(t *testing.T) {
		begin := time.Now()
		if err := s.RestartAPIServer(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Logf("apiserver restarted in %s", time.Since(begin).Round(time.Millisecond))
		createConfigMap(t, cs, "after-apiserver-restart")
		direct.waitSees(t, "direct", "after-apiserver-restart")
		proxied.waitSees(t, "proxied", "after-apiserver-restart")
	})

	t.Run("etcd restart", func(t *testing.T) {
		begin := time.Now()
		if err := s.RestartEtcd(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Logf("etcd restarted in %s", time.Since(begin).Round(time.Millisecond))
		createConfigMap(t, cs, "after-etcd-restart")
		direct.waitSees(t, "direct", "after-etcd-restart")
		proxied.waitSees(t, "proxied", "after-etcd-restart")
	})

	t.Run("proxy cut", func(t *testing.T) {
		proxy.Cut()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := viaProxy.CoreV1().ConfigMaps("default").Get(ctx, "after-etcd-restart", metav1.GetOptions{}); err == nil {
			t.Error("a request through the cut proxy succeeded")
		}
		createConfigMap(t, cs, "during-cut")
		proxy.Restore()
		proxied.waitSees(t, "proxied after cut", "during-cut")
	})

	t.Run("proxy pause", func(t *testing.T) {
		proxy.Pause()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := viaProxy.CoreV1().ConfigMaps("default").Get(ctx, "during-cut", metav1.GetOptions{}); err == nil {
			t.Error("a request through the paused proxy succeeded")
		}
		createConfigMap(t, cs, "during-pause")
		proxy.Restore()
		proxied.waitSees(t, "proxied after pause", "during-pause")
	})

	t.Run("compaction gives 410", func(t *testing.T) {
		oldRV := createConfigMap(t, cs, "before-compaction")
		proxy.Cut()
		createConfigMap(t, cs, "during-compaction-1")
		createConfigMap(t, cs, "during-compaction-2")
		rev, err := s.CompactEtcd(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if rev <= 0 {
			t.Fatalf("CompactEtcd returned revision %d", rev)
		}
		t.Logf("compacted etcd at revision %d", rev)

		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: oldRV})
		switch {
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			t.Logf("watch from resourceVersion %s refused: %v", oldRV, err)
		case err != nil:
			t.Fatalf("watch from resourceVersion %s: %v, want 410", oldRV, err)
		default:
			ev, ok := <-w.ResultChan()
			w.Stop()
			status, isStatus := ev.Object.(*metav1.Status)
			if !ok || ev.Type != watch.Error || !isStatus || status.Code != http.StatusGone {
				t.Fatalf("watch from resourceVersion %s: first event %v %+v, want an ERROR event with code 410", oldRV, ev.Type, ev.Object)
			}
			t.Logf("watch from resourceVersion %s: %s", oldRV, status.Message)
		}

		// The proxied informer's next watch resumes from a compacted
		// revision: it must relist and see what changed while it was cut.
		proxy.Restore()
		proxied.waitSees(t, "proxied after compaction", "during-compaction-1", "during-compaction-2")
	})
}

// TestPrometheusAlertmanager runs Prometheus and Alertmanager against a
// tiny exporter and an always-firing rule.
func TestPrometheusAlertmanager(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and Alertmanager; skipped with -short")
	}
	ctx := t.Context()

	reg := prometheus.NewRegistry()
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "kce_sandbox_test_gauge", Help: "A gauge for the sandbox test."})
	gauge.Set(42)
	reg.MustRegister(gauge)
	target := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer target.Close()

	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(`groups:
- name: sandbox-test
  rules:
  - alert: SandboxAlwaysFiring
    expr: vector(1)
    for: 0s
    labels:
      severity: test
    annotations:
      summary: always firing
`), 0o644); err != nil {
		t.Fatal(err)
	}

	receiver, err := NewWebhookReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer receiver.Close()

	begin := time.Now()
	am, err := StartAlertmanager(ctx, AlertmanagerOptions{WebhookURL: receiver.URL()})
	if err != nil {
		t.Fatal(err)
	}
	track(am.Dir())
	t.Cleanup(func() {
		if err := am.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("alertmanager ready in %s", time.Since(begin).Round(time.Millisecond))

	begin = time.Now()
	prom, err := StartPrometheus(ctx, PrometheusOptions{
		Targets:         []ScrapeTarget{{Job: "gauge", Addr: strings.TrimPrefix(target.URL, "http://")}},
		RuleFiles:       []string{rules},
		AlertmanagerURL: am.URL(),
	})
	if err != nil {
		t.Fatal(err)
	}
	track(prom.Dir())
	t.Cleanup(func() {
		if err := prom.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("prometheus ready in %s", time.Since(begin).Round(time.Millisecond))

	v, err := prom.WaitFor(ctx, "kce_sandbox_test_gauge", func(v model.Vector) bool { return len(v) == 1 }, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := v[0]; got.Value != 42 || got.Metric["job"] != "gauge" {
		t.Errorf("kce_sandbox_test_gauge = %v, want 42 with job=gauge", got)
	}
	t.Logf("gauge scraped after %s", time.Since(begin).Round(time.Millisecond))

	m, err := prom.QueryRange(ctx, "kce_sandbox_test_gauge", time.Now().Add(-30*time.Second), time.Now(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || len(m[0].Values) == 0 || m[0].Values[len(m[0].Values)-1].Value != 42 {
		t.Errorf("range query = %v, want one series ending in 42", m)
	}

	alert, err := receiver.WaitFor(ctx, func(a ReceivedAlert) bool {
		return a.Status == "firing" && a.Labels["alertname"] == "SandboxAlwaysFiring"
	}, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if alert.Labels["severity"] != "test" || alert.Annotations["summary"] != "always firing" {
		t.Errorf("alert = %+v, want severity=test and the summary annotation", alert)
	}
	t.Logf("alert reached the webhook %s after prometheus start: %v", time.Since(begin).Round(time.Millisecond), alert.Labels)

	failures, err := prom.RuleEvaluationFailures(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if failures != 0 {
		t.Errorf("rule evaluation failures = %v, want 0", failures)
	}
}

// TestPortInUse checks that a component that loses a port race is
// recognised, which is what lets Start retry on fresh ports.
func TestPortInUse(t *testing.T) {
	s := needShared(t)
	taken, err := listenLoopback()
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	bin, err := binary(s.binDir, string(Etcd))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	track(dir)
	url := "http://" + taken.Addr().String()
	sp := newSpawner()
	defer sp.close()
	_, err = launch(t.Context(), sp, launchSpec{
		name:    "etcd",
		bin:     bin,
		args:    []string{"--data-dir=" + dir + "/etcd", "--listen-client-urls=" + url, "--advertise-client-urls=" + url, "--listen-peer-urls=http://127.0.0.1:0"},
		logPath: filepath.Join(dir, "etcd.log"),
		ready:   func(context.Context) error { return errors.New("never ready") },
	})
	if !errors.Is(err, errPortInUse) {
		t.Fatalf("launch on a taken port: err = %v, want errPortInUse", err)
	}
}

// TestOrphansDie kills a test binary that runs a sandbox with SIGKILL, so
// that no cleanup runs, and checks that its etcd dies too (Pdeathsig, see
// spawner).
func TestOrphansDie(t *testing.T) {
	needShared(t)
	dir := t.TempDir()
	track(dir)
	child := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), orphanEnv+"="+dir)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var etcdPid int
	if _, err := fmt.Fscanf(out, "ready %d\n", &etcdPid); err != nil {
		_ = child.Process.Kill()
		_ = child.Wait()
		t.Fatalf("child sandbox did not start: %v", err)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	begin := time.Now()
	err = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(survivors([]string{dir})) == 0, nil
	})
	if err != nil {
		t.Fatalf("etcd (pid %d) outlived its SIGKILLed parent: %v", etcdPid, survivors([]string{dir}))
	}
	t.Logf("etcd (pid %d) died %s after its parent was SIGKILLed", etcdPid, time.Since(begin).Round(time.Millisecond))
}
