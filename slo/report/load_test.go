package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

func writeSLOFile(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "slos.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A 1d period with the default tiers: `slo validate` refuses it (no
// ticket pair is left), the report takes it without the ticket tier and
// says so, with the line slo validate names.
func TestLoadFileTierOfNoPairIsAWarning(t *testing.T) {
	const doc = `service: shop
slos:
  - name: weekly
    objective: 0.99
    period: 7d
    sli:
      latency: {metric: kube_convergence_rollout_duration_seconds, threshold: 300}
  - name: daily
    objective: 0.99
    period: 1d
    sli:
      latency: {metric: kube_convergence_rollout_duration_seconds, threshold: 300}
    alerting:
      page: {minEvents: 5}
`
	path := writeSLOFile(t, doc)
	_, verr := slo.Load(path, nil)
	if verr == nil || !strings.Contains(verr.Error(), "no window pair is left for a 1d period") {
		t.Fatalf("slo.Load: %v, want the 1d period refused", verr)
	}
	f, warnings, err := LoadFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], verr.Error()+"; ") || !strings.Contains(warnings[0], "without the ticket tier") {
		t.Errorf("warnings %q, want slo validate's %q and what the report does", warnings, verr)
	}
	if len(f.SLOs) != 2 {
		t.Fatalf("%d SLOs, want 2", len(f.SLOs))
	}
	weekly, daily := f.SLOs[0], f.SLOs[1]
	if !weekly.Alerting.Ticket.Enabled || len(weekly.Alerting.Ticket.Windows) != 2 {
		t.Errorf("the 7d SLO's ticket tier %+v: want it untouched", weekly.Alerting.Ticket)
	}
	if daily.Period != slo.Day || daily.Alerting.Ticket.Enabled || !daily.Alerting.Page.Enabled || daily.Alerting.Page.MinEvents != 5 ||
		len(daily.Alerting.Page.Windows) != 1 || daily.Alerting.Page.Windows[0].Long != time.Hour {
		t.Errorf("the 1d SLO: period %v, page %+v, ticket enabled %v; want 1d, the page's 1h/5m with minEvents 5, no ticket", daily.Period, daily.Alerting.Page, daily.Alerting.Ticket.Enabled)
	}
}

// Any other problem fails as slo validate does, the rule problems
// included in its message.
func TestLoadFileOtherProblemsFailAsValidate(t *testing.T) {
	for _, doc := range []string{
		"service: shop\nslos:\n  - name: x\n    objective: 1.5\n    period: 30d\n    sli:\n      latency: {metric: kube_convergence_rollout_duration_seconds, threshold: 300}\n",
		// A tier problem next to an SLI problem.
		"service: shop\nslos:\n  - name: x\n    objective: 0.99\n    period: 1d\n    sli:\n      latency: {metric: kube_convergence_rollout_duration_seconds, threshold: 4}\n",
	} {
		path := writeSLOFile(t, doc)
		_, verr := slo.Load(path, nil)
		_, _, err := LoadFile(path, nil)
		if verr == nil || err == nil || err.Error() != verr.Error() {
			t.Errorf("LoadFile: %v; slo.Load: %v; want the same error", err, verr)
		}
	}
}

// OpenSLO: the tier is disabled in the alerting annotation, the other
// keys of the annotation kept.
func TestLoadFileOpenSLOTierOfNoPair(t *testing.T) {
	const doc = `apiVersion: openslo/v1
kind: SLO
metadata:
  name: daily
  annotations:
    kube-convergence.io/alerting: |
      page: {minEvents: 3}
spec:
  service: shop
  indicator:
    metadata: {name: errors}
    spec:
      ratioMetric:
        counter: true
        good:
          metricSource: {type: Prometheus, spec: {query: 'http_requests_total{code!~"5.."}'}}
        total:
          metricSource: {type: Prometheus, spec: {query: 'http_requests_total'}}
  timeWindow:
    - duration: 1d
      isRolling: true
  budgetingMethod: Occurrences
  objectives:
    - target: 0.99
`
	path := writeSLOFile(t, doc)
	if _, err := slo.Load(path, nil); err == nil {
		t.Fatal("slo.Load took a 1d period with the default ticket tier")
	}
	f, warnings, err := LoadFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `ticket: no window pair is left for a 1d period`) {
		t.Errorf("warnings %q", warnings)
	}
	if s := f.SLOs[0]; s.Alerting.Ticket.Enabled || !s.Alerting.Page.Enabled || s.Alerting.Page.MinEvents != 3 {
		t.Errorf("alerting %+v: want the ticket tier off, the page's minEvents 3 kept", s.Alerting)
	}
}
