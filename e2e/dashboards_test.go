package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-convergence/kube-convergence-exporter/dashboards"
	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

// mayStayEmpty names the panels allowed to return no data in
// TestDashboards ("dashboard uid / panel title"), and why. Each one's
// description must say when it is legitimately empty (checked). The
// exporter creates its counters at zero (a rollout's threshold counters
// when it opens), so even the SLO bad-event panels return a 0 line, and a 0
// proves that their label matchers (stage, threshold="300.0") select real
// series. Only panels that need what the demo, the shared exporter and this
// Prometheus do not have may stay empty (controller-runtime operators,
// admission probes, an API server scrape, a risky webhook); the tests named
// check their queries' series.
var mayStayEmpty = map[string]string{
	"kce-controllers / Hot objects":                                 "the demo writes no object more than churn.hotWrites (60) times in 5 minutes; e2e TestChurn proves the panel's metric",
	"kce-controllers / Field-ownership fights over the time range":  "nobody fights over fields in the demo; e2e TestChurn proves the metric",
	"kce-controllers / Gaps left out as recorder-limited, per hour": "needs a legacy-recorder event throttled for 5 minutes, longer than the test",
	"kce-controllers / Reconcile error ratio (controller-runtime)":  "the sandbox runs no controller-runtime operator; promtool tests the record (rules/tests/controllers.test.yml)",
	"kce-webhooks / Share of calls slower than half the timeout":    "this Prometheus does not scrape the API server; TestWebhookNearTimeoutAlert reads the record on one that does",
	"kce-webhooks / Findings":                                       "the demo's webhook is well scoped; TestWebhookAuditFindings checks every finding",
	"kce-webhooks / Probe duration":                                 "the shared exporter runs without admissionProbes; TestAdmissionProbes checks the histogram",
	"kce-webhooks / Probe results per minute":                       "the shared exporter runs without admissionProbes; TestAdmissionProbes checks the counter",
	"kce-webhooks / Webhooks each probe goes through":               "the shared exporter runs without admissionProbes; TestAdmissionProbes checks the gauge",
}

// mayListNothing names the query variables allowed to list no value.
var mayListNothing = map[string]string{
	"cluster":      "the sandbox is one cluster: its series have no cluster label",
	"exporter_url": "the shared exporter runs without --web.external-url (TestSLORulesOnRealPrometheus relies on that)",
}

// TestDashboards is the dashboards issue's end-to-end acceptance: with the
// demo workload running on the shared exporter (rollouts that converge,
// stall and hit a quota, scale-downs, pods that never become ready), a real
// Prometheus with the bundled rules returns data for every target of every
// committed dashboard, run the way Grafana runs it with every variable at
// its All value .* and $__rate_interval at 1m; latency targets with
// exemplars enabled return exemplars; every variable lists values.
//
// Not parallel: the demo's churn loads the 2-core sandbox, and the other
// tests time pod stages to 0.3 s. About 1.5 minutes.
func TestDashboards(t *testing.T) {
	e := shared.forTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var boards []*dashboards.Parsed
	for _, d := range dashboards.All() {
		b, err := os.ReadFile(filepath.Join("..", d.Path()))
		if err != nil {
			t.Fatal(err)
		}
		p, err := dashboards.Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", d.Path(), err)
		}
		boards = append(boards, p)
	}
	checkAllowList(t, boards)

	// exemplar-storage: the latency panels ask for exemplars. Otherwise a
	// stock Prometheus, as users run it.
	prom := startRulesPrometheus(ctx, t, e, "", "--enable-feature=exemplar-storage")
	if _, err := prom.WaitFor(ctx, `up{job="kube-convergence-exporter"} == 1`, func(v model.Vector) bool { return len(v) == 1 }, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	start := time.Now()

	if err := demo.Install(ctx, client); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Stuck and never-ready pods would keep loading the sandbox for the
		// tests that run after this one.
		for _, ns := range []string{demo.Namespace, demo.QuotaNamespace} {
			if err := client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
				t.Errorf("delete namespace %s: %v", ns, err)
			}
		}
	})
	// The demo's admission webhook: the webhooks dashboard's table and
	// caBundle panel read it.
	hook, err := demo.InstallSlowWebhook(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), demo.SlowWebhookConfiguration, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete the demo webhook: %v", err)
		}
		_ = hook.Close()
	})
	churnCtx, stopChurn := context.WithCancel(ctx)
	var churning sync.WaitGroup
	churning.Go(func() { demo.Churn(churnCtx, client, slog.New(slog.NewTextHandler(testWriter{t}, nil))) })
	defer func() {
		stopChurn()
		churning.Wait() // it logs through t: stop it before t ends
	}()

	// Poll every target until each returns data or the deadline passes:
	// stalls need the 15 s stall threshold, endpoint removals a scale-down,
	// the SLO records a completed rollout.
	targets := map[string]dashboards.Target{}
	var keys []string
	for _, b := range boards {
		for _, tg := range b.Targets {
			targets[tg.String()] = tg
			keys = append(keys, tg.String())
		}
	}
	pending := slices.Clone(keys)
	lastErr := map[string]string{}
	deadline := time.Now().Add(100 * time.Second)
	// Targets allowed to stay empty are not waited for: once only they are
	// left, polling stops (they would hold the test to its deadline).
	onlyAllowed := func() bool {
		return !slices.ContainsFunc(pending, func(k string) bool {
			_, ok := mayStayEmpty[targets[k].Dashboard+" / "+targets[k].Panel]
			return !ok
		})
	}
	for len(pending) > 0 && !onlyAllowed() && time.Now().Before(deadline) {
		rangeNow := time.Since(start)
		var still []string
		for _, k := range pending {
			tg := targets[k]
			ok, info := hasData(ctx, prom, tg, varsOf(boards, tg.Dashboard), start, rangeNow)
			if !ok {
				still = append(still, k)
				lastErr[k] = info
			}
		}
		pending = still
		// Only allowed-empty panels left: waiting longer proves nothing.
		if !slices.ContainsFunc(pending, func(k string) bool {
			_, ok := mayStayEmpty[targets[k].Dashboard+" / "+targets[k].Panel]
			return !ok
		}) {
			break
		}
		if len(pending) > 0 {
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(2 * time.Second):
			}
		}
	}
	t.Logf("every target polled for %v after the demo workload started; %d of %d without data", time.Since(start).Round(time.Second), len(pending), len(keys))
	for key := range mayStayEmpty {
		if !slices.ContainsFunc(pending, func(k string) bool { tg := targets[k]; return tg.Dashboard+" / "+tg.Panel == key }) {
			t.Logf("%s may stay empty but returned data: drop it from mayStayEmpty", key)
		}
	}
	for _, k := range pending {
		tg := targets[k]
		if reason, ok := mayStayEmpty[tg.Dashboard+" / "+tg.Panel]; ok {
			t.Logf("%s: empty, allowed: %s", k, reason)
			continue
		}
		t.Errorf("%s: no data after %v: %s\n  query: %s", k, time.Since(start).Round(time.Second), lastErr[k], tg.Expr)
	}

	// Exemplars: every latency target that asks for them gets some, with
	// the object's identity.
	withExemplars, fewest := 0, math.MaxInt
	defer func() { t.Logf("%d targets with exemplars on, at least %d exemplars each", withExemplars, fewest) }()
	for _, k := range keys {
		tg := targets[k]
		if !tg.Exemplar {
			continue
		}
		expr, err := dashboards.Expand(tg.Expr, varsOf(boards, tg.Dashboard), intervals(time.Since(start)))
		if err != nil {
			t.Fatal(err)
		}
		n, err := exemplars(ctx, prom, expr, start, time.Now())
		if err != nil || n == 0 {
			t.Errorf("%s: %d exemplars (%v)\n  query: %s", k, n, err, expr)
		}
		withExemplars++
		fewest = min(fewest, n)
	}

	// Variables list values (cluster and exporter_url: their metric exists).
	for _, b := range boards {
		for _, v := range b.Variables {
			if v.Type != "query" {
				continue
			}
			sel, label, ok := dashboards.LabelValuesQuery(v.Query)
			if !ok {
				t.Errorf("%s / %s: query %q is not label_values", b.UID, v.Name, v.Query)
				continue
			}
			expr, err := dashboards.Expand(sel, b.Variables, intervals(time.Since(start)))
			if err != nil {
				t.Fatal(err)
			}
			res, err := prom.Query(ctx, fmt.Sprintf("count by (%s) (%s)", label, expr))
			if err != nil {
				t.Errorf("%s / %s: %v", b.UID, v.Name, err)
				continue
			}
			var values []string
			for _, s := range res {
				if lv := s.Metric[model.LabelName(label)]; lv != "" {
					values = append(values, string(lv))
				}
			}
			switch reason, allowed := mayListNothing[v.Name]; {
			case len(values) > 0:
			case allowed && len(res) > 0:
				t.Logf("%s / %s: no value, allowed: %s", b.UID, v.Name, reason)
			default:
				t.Errorf("%s / %s: %q lists no %s (series: %v)", b.UID, v.Name, v.Query, label, res)
			}
		}
	}

	// The stalled tables' names link to the objects' timelines.
	checkTimelineLinks(ctx, t, prom, boards, e, func() dashboards.Intervals { return intervals(time.Since(start)) })

	failures, err := prom.RuleEvaluationFailures(ctx)
	if err != nil || failures != 0 {
		t.Errorf("rule evaluation failures %v (%v), want 0", failures, err)
	}
}

// checkAllowList keeps the allow-list honest: every entry names a real
// panel whose description says when it is empty.
func checkAllowList(t *testing.T, boards []*dashboards.Parsed) {
	t.Helper()
	for key := range mayStayEmpty {
		found := false
		for _, b := range boards {
			for _, tg := range b.Targets {
				if tg.Dashboard+" / "+tg.Panel == key {
					found = true
					if !strings.Contains(strings.ToLower(tg.Description), "empty") {
						t.Errorf("%s may stay empty, but its description does not say when: %q", key, tg.Description)
					}
				}
			}
		}
		if !found {
			t.Errorf("allow-list entry %q names no panel", key)
		}
	}
}

func varsOf(boards []*dashboards.Parsed, uid string) []dashboards.Variable {
	for _, b := range boards {
		if b.UID == uid {
			return b.Variables
		}
	}
	return nil
}

// rangeStep is the step of range queries, Grafana's $__interval here.
const rangeStep = 5 * time.Second

// intervals are Grafana's built-in intervals for a time range of length r:
// $__rate_interval fixed at 1m (the brief's fixed window; at a 1 s scrape
// interval Grafana would pick less).
func intervals(r time.Duration) dashboards.Intervals {
	return dashboards.Intervals{RateInterval: time.Minute, Interval: rangeStep, Range: r.Round(time.Second) + time.Second}
}

// hasData runs a target as Grafana would over [start, now] and reports
// whether it returned at least one sample that is a number (a quantile of
// empty buckets is NaN: Grafana draws nothing).
func hasData(ctx context.Context, prom *sandbox.Prometheus, tg dashboards.Target, vars []dashboards.Variable, start time.Time, r time.Duration) (bool, string) {
	expr, err := dashboards.Expand(tg.Expr, vars, intervals(r))
	if err != nil {
		return false, err.Error()
	}
	if tg.Instant {
		v, err := prom.Query(ctx, expr)
		if err != nil {
			return false, err.Error()
		}
		for _, s := range v {
			if !math.IsNaN(float64(s.Value)) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("instant query: %d series, none a number", len(v))
	}
	m, err := prom.QueryRange(ctx, expr, start, time.Now(), rangeStep)
	if err != nil {
		return false, err.Error()
	}
	for _, s := range m {
		for _, p := range s.Values {
			if !math.IsNaN(float64(p.Value)) {
				return true, ""
			}
		}
	}
	return false, fmt.Sprintf("range query: %d series, no number", len(m))
}

// exemplars returns how many exemplars Prometheus holds for the series
// that expr selects between start and end (/api/v1/query_exemplars, what
// Grafana asks when a target has exemplars on).
func exemplars(ctx context.Context, prom *sandbox.Prometheus, expr string, start, end time.Time) (int, error) {
	form := url.Values{
		"query": {expr},
		"start": {strconv.FormatInt(start.Unix(), 10)},
		"end":   {strconv.FormatInt(end.Unix()+1, 10)},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, prom.URL()+"/api/v1/query_exemplars", strings.NewReader(form.Encode()))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   []struct {
			Exemplars []struct {
				Labels map[string]string `json:"labels"`
			} `json:"exemplars"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, fmt.Errorf("query_exemplars: %s: %w", resp.Status, err)
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("query_exemplars: %s", r.Error)
	}
	n := 0
	for _, s := range r.Data {
		for _, ex := range s.Exemplars {
			if ex.Labels["uid"] == "" {
				return n, fmt.Errorf("exemplar without the object's uid: %v", ex.Labels)
			}
			n++
		}
	}
	return n, nil
}

// testWriter sends the demo's churn log to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
