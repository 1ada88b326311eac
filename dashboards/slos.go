package dashboards

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
	"github.com/kube-convergence/kube-convergence-exporter/rules"
	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

// bundled is what the dashboards take from the bundled SLOs
// (rules/slos.yaml), so that their thresholds are the SLOs' own.
type bundled struct {
	// service is the sloth_service of every bundled SLO: the SLO panels
	// select on it, so that other Sloth-style SLOs in the same Prometheus
	// do not mix in.
	service string
	slos    []slo.SLO
}

// loadBundled parses rules/slos.yaml once.
var loadBundled = sync.OnceValues(func() (*bundled, error) {
	f, err := slo.Parse(rules.SLOSpecPath, rules.SLOSpec())
	if err != nil {
		return nil, fmt.Errorf("bundled SLOs: %w", err)
	}
	if len(f.SLOs) == 0 {
		return nil, fmt.Errorf("bundled SLOs: %s has none", rules.SLOSpecPath)
	}
	b := &bundled{service: f.SLOs[0].Service, slos: f.SLOs}
	for _, s := range f.SLOs {
		if s.Service != b.service {
			// One service selector per panel; a second service would need
			// a variable.
			return nil, fmt.Errorf("bundled SLOs: services %q and %q: the dashboards expect one", b.service, s.Service)
		}
	}
	return b, nil
})

// latencyThreshold is one bundled latency SLO's threshold on a histogram.
type latencyThreshold struct {
	slo     string
	seconds float64
	label   string              // as Prometheus 3 stores le and the exporter writes threshold: "5.0"
	match   map[string][]string // the SLO's label selection (stage, kind, ...)
}

// thresholds returns the latency SLOs on the histogram metric, by
// threshold (the order of lines on a panel).
func (b *bundled) thresholds(metric string) []latencyThreshold {
	var out []latencyThreshold
	for _, s := range b.slos {
		if l := s.SLI.Latency; l != nil && l.Metric == metric {
			out = append(out, latencyThreshold{slo: s.Name, seconds: l.Threshold, label: latency.Threshold(l.Threshold), match: l.Match})
		}
	}
	slices.SortFunc(out, func(a, b latencyThreshold) int {
		switch {
		case a.seconds < b.seconds:
			return -1
		case a.seconds > b.seconds:
			return 1
		}
		return 0
	})
	return out
}

// windowFactors returns, for each SLI window (slo:sli_error:ratio_rate<w>),
// the burn-rate factors of the bundled alerts that read it, as long or
// short window, split by tier. A window no alert reads has none.
func (b *bundled) windowFactors() map[time.Duration]struct{ page, ticket float64 } {
	out := map[time.Duration]struct{ page, ticket float64 }{}
	add := func(w time.Duration, factor float64, page bool) {
		lowest := func(have float64) float64 {
			if have == 0 {
				return factor
			}
			return min(have, factor)
		}
		f := out[w]
		if page {
			f.page = lowest(f.page)
		} else {
			f.ticket = lowest(f.ticket)
		}
		out[w] = f
	}
	for _, s := range b.slos {
		for _, tier := range []struct {
			t    slo.Tier
			page bool
		}{{s.Alerting.Page, true}, {s.Alerting.Ticket, false}} {
			if !tier.t.Enabled {
				continue
			}
			for _, w := range tier.t.Windows {
				add(w.Long, w.Factor, tier.page)
				add(w.Short, w.Factor, tier.page)
			}
		}
	}
	return out
}

// burnRateSteps colours a burn rate read over window w: yellow from 1 (the
// budget would be gone before the period ends), orange from the lowest
// ticket factor of an alert reading w, red from the lowest page factor.
func (b *bundled) burnRateSteps(w time.Duration) []step {
	f := b.windowFactors()[w]
	steps := []step{{color: "green"}, {value: 1, color: "yellow"}}
	if f.ticket > 1 {
		steps = append(steps, step{value: f.ticket, color: "orange"})
	}
	if f.page > 1 {
		steps = append(steps, step{value: f.page, color: "red"})
	}
	return steps
}

// pageFactor is the burn rate at which the fastest page of any bundled
// SLO fires (14.4 with the SRE workbook's windows).
func (b *bundled) pageFactor() float64 {
	var f float64
	for _, s := range b.slos {
		if s.Alerting.Page.Enabled {
			for _, w := range s.Alerting.Page.Windows {
				f = max(f, w.Factor)
			}
		}
	}
	return f
}

// lowestObjective is the default threshold of SLI panels; each SLO
// overrides it with its own objective.
func (b *bundled) lowestObjective() float64 {
	o := 1.0
	for _, s := range b.slos {
		o = min(o, s.ObjectiveFloat())
	}
	return o
}

// ForSLOFile renders the dashboard of a user's SLO file (`slo generate
// --dashboards DIR`): the SLO rows of the overview (SLI over each period
// against its objective, budget remaining, burn rate now, per window and
// over time) for the SLOs of f only, selected by sloth_id. Its uid is
// "slo-" and the file's services, so links and alerts can name it.
func ForSLOFile(f *slo.File) (Dashboard, []byte, error) {
	if len(f.SLOs) == 0 {
		return Dashboard{}, nil, fmt.Errorf("%s: no SLOs", f.Name)
	}
	var services, ids []string
	for _, s := range f.SLOs {
		if !slices.Contains(services, s.Service) {
			services = append(services, s.Service)
		}
		ids = append(ids, regexp.QuoteMeta(s.ID()))
	}
	d := Dashboard{UID: SLODashboardUID(services), Title: "SLOs / " + strings.Join(services, ", ")}
	b := &bundled{service: services[0], slos: f.SLOs}
	brd := newBoard("The SLOs of "+f.Name+": is each one met over its period, how fast is its error budget burning, per window. "+
		"Generated by kube-convergence-exporter slo generate --dashboards; regenerate it when the SLO file changes.",
		datasourceVariable(), clusterVariable())
	sloSection(brd, b, fmt.Sprintf(`sloth_id=~%q, cluster=~"$cluster"`, strings.Join(ids, "|")))
	dash, err := brd.dashboard(d)
	if err != nil {
		return d, nil, fmt.Errorf("dashboard %s: %w", d.UID, err)
	}
	out, err := json.MarshalIndent(dash, "", "  ")
	if err != nil {
		return d, nil, fmt.Errorf("dashboard %s: %w", d.UID, err)
	}
	return d, append(out, '\n'), nil
}

// SLODashboardUID is the uid of the dashboard of SLO files with these
// services: Grafana allows 40 characters.
func SLODashboardUID(services []string) string {
	uid := "slo-" + strings.Join(services, "-")
	if len(uid) > 40 {
		uid = strings.TrimRight(uid[:40], "-")
	}
	return uid
}
