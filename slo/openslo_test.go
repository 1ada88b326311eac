package slo

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestOpenSLO(t *testing.T) {
	b, err := os.ReadFile("testdata/openslo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse("testdata/openslo.yaml", b)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range f.SLOs {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, " "); got != "checkout-availability checkout-latency-fast checkout-latency-not-too-slow" {
		t.Fatalf("SLOs %s", got)
	}

	avail := f.SLOs[0]
	if avail.Service != "checkout" || avail.Period != 28*Day || formatRat(avail.Objective) != "0.999" || avail.Labels["team"] != "payments" {
		t.Errorf("availability: %+v", avail)
	}
	r := avail.SLI.Ratio
	if r == nil {
		t.Fatalf("availability: want a ratio SLI, got %s", avail.SLI.Kind())
	}
	// counter: true wraps the selectors in rate(); good becomes errors
	// as total - good.
	if r.TotalQuery != `rate(http_requests_total{job="checkout"}[{{.window}}])` {
		t.Errorf("total %s", r.TotalQuery)
	}
	if r.ErrorQuery != `clamp_min(sum(rate(http_requests_total{job="checkout"}[{{.window}}])) - (sum(rate(http_requests_total{job="checkout", code!~"5.."}[{{.window}}])) or on () vector(0)), 0)` {
		t.Errorf("errors %s", r.ErrorQuery)
	}

	fast := f.SLOs[1]
	if fast.Period != 7*Day || formatRat(fast.Objective) != "0.99" || fast.Description == "" {
		t.Errorf("fast: period %v objective %s", fast.Period, formatRat(fast.Objective))
	}
	g := fast.SLI.GoodMinutes
	if g == nil || !strings.HasSuffix(g.BadWhen, ") > 0.3") || !strings.HasPrefix(g.CountWhen, "histogram_quantile(0.99") {
		t.Errorf("fast: %+v", g)
	}
	if g := f.SLOs[2].SLI.GoodMinutes; g == nil || !strings.HasSuffix(g.BadWhen, ") >= 1") {
		t.Errorf("not too slow: %+v", g)
	}
	if f.SLOs[2].Alerting.Page.For != 2*time.Minute || !f.SLOs[2].Alerting.Ticket.Enabled {
		t.Errorf("OpenSLO SLOs get the default alerting: %+v", f.SLOs[2].Alerting)
	}
	if _, err := Generate(f); err != nil {
		t.Fatal(err)
	}
}

// The alerting annotation sets the tiers the way the native alerting
// block does: here the page is off, the ticket waits 30m, and the
// no-events ticket is off.
func TestOpenSLOAlertingAnnotation(t *testing.T) {
	doc := `apiVersion: openslo/v1
kind: SLO
metadata:
  name: a
  annotations:
    kube-convergence.io/alerting: |
      name: CheckoutErrors
      page: {enabled: false}
      ticket: {for: 30m, labels: {team: payments}}
      noEvents: {enabled: false}
spec:
  service: s
  indicatorRef: errs
  timeWindow: [{duration: 28d, isRolling: true}]
  budgetingMethod: Occurrences
  objectives: [{target: 0.99}]
---
apiVersion: openslo/v1
kind: SLI
metadata: {name: errs}
spec:
  ratioMetric:
    counter: true
    bad: {metricSource: {type: Prometheus, spec: {query: 'errors_total'}}}
    total: {metricSource: {type: Prometheus, spec: {query: 'requests_total'}}}
`
	f, err := Parse("f.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	a := f.SLOs[0].Alerting
	if a.Name != "CheckoutErrors" || a.Page.Enabled || !a.Ticket.Enabled || a.Ticket.For != 30*time.Minute || a.Ticket.Labels["team"] != "payments" || a.NoEvents.Enabled {
		t.Errorf("alerting %+v", a)
	}
	rf, err := Generate(f)
	if err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, r := range rf.Groups[0].Rules {
		if r.Alert != "" {
			alerts = append(alerts, r.Alert+"/"+r.Labels["slo_tier"])
		}
	}
	if strings.Join(alerts, ",") != "CheckoutErrors/ticket" {
		t.Errorf("alerts %v, want the ticket only", alerts)
	}

	// Without the annotation: both tiers and the no-events ticket.
	f, err = Parse("f.yaml", []byte(strings.Replace(doc, "kube-convergence.io/alerting", "example.com/other", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if a := f.SLOs[0].Alerting; !a.Page.Enabled || !a.Ticket.Enabled || !a.NoEvents.Enabled {
		t.Errorf("defaults %+v", a)
	}
}

func TestOpenSLOErrors(t *testing.T) {
	const sli = `---
apiVersion: openslo/v1
kind: SLI
metadata: {name: errs}
spec:
  ratioMetric:
    counter: true
    bad: {metricSource: {type: Prometheus, spec: {query: 'errors_total'}}}
    total: {metricSource: {type: Prometheus, spec: {query: 'requests_total'}}}
`
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"alert policies", `apiVersion: openslo/v1
kind: SLO
metadata: {name: a}
spec:
  service: s
  indicatorRef: errs
  timeWindow: [{duration: 28d, isRolling: true}]
  budgetingMethod: Occurrences
  objectives: [{target: 0.99}]
  alertPolicies: [{kind: AlertPolicy}]
` + sli, `f.yaml:10: SLO "a": alertPolicies are not supported: the generated page and ticket burn-rate alerts apply; set or disable them with the metadata annotation kube-convergence.io/alerting`},
		{"alerting annotation with an unknown key", `apiVersion: openslo/v1
kind: SLO
metadata:
  name: a
  annotations:
    kube-convergence.io/alerting: |
      page: {enabeld: false}
spec:
  service: s
  indicatorRef: errs
  timeWindow: [{duration: 28d, isRolling: true}]
  budgetingMethod: Occurrences
  objectives: [{target: 0.99}]
` + sli, `f.yaml:6: SLO "a": annotation kube-convergence.io/alerting: line 1: field enabeld not found`},
		{"calendar window", `apiVersion: openslo/v1
kind: SLO
metadata: {name: a}
spec:
  service: s
  indicatorRef: errs
  timeWindow:
    - duration: 1M
      calendar: {startTime: "2024-01-01 00:00:00", timeZone: UTC}
  budgetingMethod: Occurrences
  objectives: [{target: 0.99}]
` + sli, `f.yaml:8: SLO "a": calendar time windows are not supported`},
		{"month duration", `apiVersion: openslo/v1
kind: SLO
metadata: {name: a}
spec:
  service: s
  indicatorRef: errs
  timeWindow: [{duration: 1M, isRolling: true}]
  budgetingMethod: Occurrences
  objectives: [{target: 0.99}]
` + sli, `f.yaml:7: SLO "a": timeWindow duration "1M"`},
		{"ratio timeslices", `apiVersion: openslo/v1
kind: SLO
metadata: {name: a}
spec:
  service: s
  indicatorRef: errs
  timeWindow: [{duration: 28d, isRolling: true}]
  budgetingMethod: RatioTimeslices
  objectives: [{target: 0.99}]
` + sli, `f.yaml:8: SLO "a": budgetingMethod RatioTimeslices is not supported`},
		{"missing SLI", `apiVersion: openslo/v1
kind: SLO
metadata: {name: a}
spec:
  service: s
  indicatorRef: nope
  timeWindow: [{duration: 28d, isRolling: true}]
  budgetingMethod: Occurrences
  objectives: [{targetPercent: 99}]
`, `f.yaml:6: SLO "a": indicatorRef "nope": no SLI document of that name in this file`},
		{"unknown field", `apiVersion: openslo/v1
kind: SLO
metadata: {name: a}
spec:
  service: s
  indicatorRef: errs
  timeWindow: [{duration: 28d, isRolling: true}]
  budgetingMethod: Occurrences
  objectives: [{target: 0.99, tagret: 1}]
` + sli, `f.yaml:9: unknown key "tagret"`},
		{"unknown indicator kind", `apiVersion: openslo/v1
kind: SLI
metadata: {name: errs}
spec:
  rawMetric: {}
`, `f.yaml:5: unknown indicator "rawMetric" (want ratioMetric or thresholdMetric)`},
		{"unsupported kind", `apiVersion: openslo/v1
kind: AlertPolicy
metadata: {name: p}
spec: {}
`, `f.yaml:2: OpenSLO kind "AlertPolicy" is not supported`},
		{"gauge query without window", `apiVersion: openslo/v1
kind: SLO
metadata: {name: a}
spec:
  service: s
  indicator:
    metadata: {name: i}
    spec:
      ratioMetric:
        bad: {metricSource: {type: Prometheus, spec: {query: 'errors_total'}}}
        total: {metricSource: {type: Prometheus, spec: {query: 'requests_total'}}}
  timeWindow: [{duration: 28d, isRolling: true}]
  budgetingMethod: Occurrences
  objectives: [{target: 0.99}]
`, `f.yaml:7: SLO "a": query "requests_total": set counter: true for a counter selector`},
		{"other data source", `apiVersion: openslo/v1
kind: SLO
metadata: {name: a}
spec:
  service: s
  indicator:
    metadata: {name: i}
    spec:
      thresholdMetric: {metricSource: {type: Datadog, spec: {query: 'x'}}}
  timeWindow: [{duration: 28d, isRolling: true}]
  budgetingMethod: Timeslices
  objectives: [{target: 0.99, op: lte, value: 1}]
`, `f.yaml:7: SLO "a": metricSource type "Datadog" is not supported (Prometheus)`},
		{"mixed apiVersions", `apiVersion: openslo/v1
kind: Service
metadata: {name: s}
---
apiVersion: openslo/v1alpha
kind: SLO
metadata: {name: a}
`, `f.yaml:5: apiVersion "openslo/v1alpha": every document of an OpenSLO file must be openslo/v1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}
