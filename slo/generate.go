package slo

import (
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RuleFile is a Prometheus rule file.
type RuleFile struct {
	Groups []RuleGroup `yaml:"groups"`
}

// RuleGroup is one rule group; its rules are evaluated in order, so a
// record is fresh when the rules after it read it.
type RuleGroup struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval,omitempty"`
	Rules    []Rule `yaml:"rules"`
}

// Rule is a recording or an alerting rule.
type Rule struct {
	Record      string            `yaml:"record,omitempty"`
	Alert       string            `yaml:"alert,omitempty"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// Recorded series. The slo:sli_error:ratio_rate<w> family, the slo:*
// metadata and sloth_slo_info are Sloth's names and labels (sloth_id,
// sloth_service, sloth_slo, sloth_window), so its dashboards work on them.
// The first three are ours.
const (
	// RecordBadRate and RecordTotalRate are the only rules that read the
	// exporter's metrics: bad and all events per second over 5m, 0 (not
	// absent) when nothing happened, so that averages over longer windows
	// count idle time as idle.
	RecordBadRate   = "slo:sli_bad:rate5m"
	RecordTotalRate = "slo:sli_total:rate5m"
	// RecordBadMinute is 1 in a bad minute and 0 in a good one of a
	// good-minutes SLI, absent when the minute does not count.
	RecordBadMinute = "slo:sli_bad_minute:bool"

	RecordErrorRatioPrefix = "slo:sli_error:ratio_rate" // + window: 5m, 30m, 1h, 2h, 6h, 1d, 3d
	RecordErrorRatioPeriod = "slo:sli_error:ratio_period"
	RecordObjective        = "slo:objective:ratio"
	RecordErrorBudget      = "slo:error_budget:ratio"
	RecordPeriodDays       = "slo:time_period:days"
	RecordCurrentBurnRate  = "slo:current_burn_rate:ratio"
	RecordPeriodBurnRate   = "slo:period_burn_rate:ratio"
	RecordBudgetRemaining  = "slo:period_error_budget_remaining:ratio"
	RecordInfo             = "sloth_slo_info"
)

const (
	sloth30dAlias = "slo:sli_error:ratio_rate30d"
	specName      = "kube-convergence-exporter/v1"
	labelID       = "sloth_id"
	labelService  = "sloth_service"
	labelSLO      = "sloth_slo"
	labelWindow   = "sloth_window"
	labelTier     = "slo_tier"
	labelSloth    = "sloth_severity"
	groupPrefix   = "slo-"
)

// Generate renders the rules of every SLO of f: one group per SLO, holding
// its recording rules, then its alerts.
func Generate(f *File) (*RuleFile, error) {
	rf := &RuleFile{}
	for i := range f.SLOs {
		g, err := generateSLO(&f.SLOs[i])
		if err != nil {
			return nil, fmt.Errorf("%s: slo %q: %w", position(f.Name, f.SLOs[i].Line), f.SLOs[i].Name, err)
		}
		rf.Groups = append(rf.Groups, g)
	}
	return rf, nil
}

func generateSLO(s *SLO) (RuleGroup, error) {
	g := RuleGroup{Name: groupPrefix + s.ID()}
	id := s.ID()
	sel := func(metric string) string { return fmt.Sprintf("%s{%s=%q}", metric, labelID, id) }
	labels := func(extra ...string) map[string]string {
		l := map[string]string{}
		for k, v := range s.Labels {
			l[k] = v
		}
		l[labelID], l[labelService], l[labelSLO] = id, s.Service, s.Name
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return l
	}
	base := labels(labelWindow, FormatDuration(baseWindow))

	// 1. The raw read: bad and total events per second over 5m.
	switch {
	case s.SLI.Latency != nil:
		l := s.SLI.Latency
		m, ok := latencyMetric(l.Metric)
		if !ok {
			return g, fmt.Errorf("unknown latency metric %q", l.Metric)
		}
		good := fmt.Sprintf("sum(rate(%s[5m]))", l.goodSelector(m))
		bad := fmt.Sprintf("sum(rate(%s[5m]))", l.badSelector(m))
		g.Rules = append(g.Rules,
			Rule{Record: RecordBadRate, Expr: orZero(bad), Labels: base},
			Rule{Record: RecordTotalRate, Expr: "(" + orZero(good) + ")\n+\n(" + orZero(bad) + ")", Labels: base},
		)
	case s.SLI.Ratio != nil:
		r := s.SLI.Ratio
		g.Rules = append(g.Rules,
			Rule{Record: RecordBadRate, Expr: orZero("sum(" + withWindow(r.ErrorQuery, "5m") + ")"), Labels: base},
			Rule{Record: RecordTotalRate, Expr: orZero("sum(" + withWindow(r.TotalQuery, "5m") + ")"), Labels: base},
		)
	case s.SLI.GoodMinutes != nil:
		gm := s.SLI.GoodMinutes
		minute := sel(RecordBadMinute)
		// Evaluated at every rule evaluation over the last minute: with an
		// interval of 30 s an event is seen by 2 evaluations out of 2 per
		// minute, so the ratio is the fraction of minutes whatever the
		// interval.
		g.Rules = append(g.Rules,
			Rule{Record: RecordBadMinute, Expr: fmt.Sprintf("(vector(1) and on () (%s))\nor on ()\n(vector(0) and on () (%s))", strings.TrimSpace(gm.BadWhen), strings.TrimSpace(gm.CountWhen)), Labels: labels()},
			// bad minutes per second: the fraction of bad minutes / 60 s.
			Rule{Record: RecordBadRate, Expr: orZero(fmt.Sprintf("sum(sum_over_time(%s[5m])) / sum(count_over_time(%s[5m])) / 60", minute, minute)), Labels: base},
			// counted minutes per second: 1/60 while minutes count.
			Rule{Record: RecordTotalRate, Expr: orZero(fmt.Sprintf("clamp_max(sum(count_over_time(%s[5m])), 1) / 60", minute)), Labels: base},
		)
	default:
		return g, fmt.Errorf("no indicator")
	}

	// 2. Error ratios over the Sloth windows, any other alert window, and
	// the period: averages of the 5m records (one raw read per SLO per
	// evaluation; Sloth reads the raw series over 3 d on every evaluation).
	budget := formatRat(s.Budget())
	windows := SLIWindows()
	for _, t := range []Tier{s.Alerting.Page, s.Alerting.Ticket} {
		if !t.Enabled {
			continue
		}
		for _, w := range t.Windows {
			for _, d := range []time.Duration{w.Long, w.Short} {
				if !slices.Contains(windows, d) {
					windows = append(windows, d)
				}
			}
		}
	}
	slices.Sort(windows)
	for _, w := range windows {
		g.Rules = append(g.Rules, Rule{Record: RecordErrorRatioPrefix + FormatDuration(w), Expr: errorRatio(sel, w), Labels: labels(labelWindow, FormatDuration(w))})
	}
	g.Rules = append(g.Rules, Rule{Record: RecordErrorRatioPeriod, Expr: errorRatio(sel, s.Period), Labels: labels(labelWindow, FormatDuration(s.Period))})
	if s.Period == 30*Day {
		g.Rules = append(g.Rules, Rule{Record: sloth30dAlias, Expr: sel(RecordErrorRatioPeriod), Labels: labels(labelWindow, "30d")})
	}

	// 3. Metadata (Sloth's).
	days := strconv.FormatFloat(s.Period.Hours()/24, 'g', -1, 64)
	g.Rules = append(g.Rules,
		Rule{Record: RecordObjective, Expr: "vector(" + formatRat(s.Objective) + ")", Labels: labels()},
		Rule{Record: RecordErrorBudget, Expr: "vector(" + budget + ")", Labels: labels()},
		Rule{Record: RecordPeriodDays, Expr: "vector(" + days + ")", Labels: labels()},
		Rule{Record: RecordCurrentBurnRate, Expr: fmt.Sprintf("sum(%s) / %s", sel(RecordErrorRatioPrefix+"5m"), budget), Labels: labels()},
		Rule{Record: RecordPeriodBurnRate, Expr: fmt.Sprintf("sum(%s) / %s", sel(RecordErrorRatioPeriod), budget), Labels: labels()},
		Rule{Record: RecordBudgetRemaining, Expr: fmt.Sprintf("1 - sum(%s)", sel(RecordPeriodBurnRate)), Labels: labels()},
		Rule{Record: RecordInfo, Expr: "vector(1)", Labels: labels("sloth_objective", formatRat(new(big.Rat).Mul(s.Objective, big.NewRat(100, 1))), "sloth_spec", specName)},
	)

	// 4. Alerts.
	for _, t := range []struct {
		name string
		tier Tier
	}{{TierPage, s.Alerting.Page}, {TierTicket, s.Alerting.Ticket}} {
		if !t.tier.Enabled || len(t.tier.Windows) == 0 {
			continue
		}
		g.Rules = append(g.Rules, alertRule(s, t.name, t.tier, sel))
	}

	for _, r := range g.Rules {
		if err := checkPromQL(r.Expr); err != nil {
			return g, fmt.Errorf("generated rule %s%s: %w", r.Record, r.Alert, err)
		}
	}
	return g, nil
}

// orZero makes an absent result 0: `or on ()` because the result of a sum
// without grouping has no labels, and vector(0) must not be added beside a
// result that has some.
func orZero(expr string) string { return expr + "\nor on () vector(0)" }

// errorRatio is bad / total over w from the 5m records. sum() around each
// side folds series whose labels changed within the window (a relabelled
// SLO must not break its long windows); the denominator's `> 0` makes zero
// traffic give no sample instead of NaN.
func errorRatio(sel func(string) string, w time.Duration) string {
	if w == baseWindow {
		return fmt.Sprintf("sum(%s)\n/\n(sum(%s) > 0)", sel(RecordBadRate), sel(RecordTotalRate))
	}
	r := FormatDuration(w)
	return fmt.Sprintf("sum(sum_over_time(%s[%s]))\n/\n(sum(sum_over_time(%s[%s])) > 0)", sel(RecordBadRate), r, sel(RecordTotalRate), r)
}

// eventsIn estimates the events in the window w: the 5m event rate read
// every minute (a subquery: 60 points for 1 h), summed, times 60 s. Each
// event stays in the 5m rate for 5 minutes, so 5 points see it at 1/300 per
// second: one event. A step of 5m would be cheaper but loses the events
// whose counter step straddles two back-to-back 5m windows (range selectors
// are left-open): 1 in 5 with a 1m scrape interval. Steps before the
// records existed (the first hours after deploying the rules) count as no
// events, where an average times the window would extrapolate 3 events in
// the first 30 minutes to 36 in 6 hours. Assumes a rule evaluation interval
// of at most 1m (Prometheus's default is 1m): a longer one counts events
// more than once.
func eventsIn(sel func(string) string, w time.Duration) string {
	return fmt.Sprintf("sum(sum_over_time(%s[%s:1m])) * 60", sel(RecordTotalRate), FormatDuration(w))
}

func alertRule(s *SLO, tier string, t Tier, sel func(string) string) Rule {
	budget := formatRat(s.Budget())
	var pairs []string
	for _, w := range t.Windows {
		factor := strconv.FormatFloat(w.Factor, 'g', -1, 64)
		conds := []string{
			fmt.Sprintf("(%s / %s > %s)", sel(RecordErrorRatioPrefix+FormatDuration(w.Long)), budget, factor),
			fmt.Sprintf("(%s / %s > %s)", sel(RecordErrorRatioPrefix+FormatDuration(w.Short)), budget, factor),
		}
		if t.MinEvents > 0 {
			conds = append(conds, fmt.Sprintf("(%s >= %d)", eventsIn(sel, w.Long), t.MinEvents))
		}
		pairs = append(pairs, "  (\n    "+strings.Join(conds, "\n    and on ()\n    ")+"\n  )")
	}
	// The value is the long window's burn rate; max without sloth_window
	// keeps one alert per tier whichever pair fires, so a switch from one
	// pair to the other does not restart `for`.
	expr := "max without (" + labelWindow + ") (\n" + strings.Join(pairs, "\n  or\n") + "\n)"

	labels := map[string]string{}
	for k, v := range s.Alerting.Labels {
		labels[k] = v
	}
	for k, v := range t.Labels {
		labels[k] = v
	}
	labels[labelTier], labels[labelSloth] = tier, tier

	annotations := map[string]string{
		"summary": fmt.Sprintf("{{ $labels.%s }}/{{ $labels.%s }}: error budget burning {{ $value | humanize }}x faster than sustainable (%s)", labelService, labelSLO, tier),
		"description": fmt.Sprintf("%sObjective: %s%% good over %s (error budget %s%%). %s",
			sentence(s.Description), formatRat(new(big.Rat).Mul(s.Objective, big.NewRat(100, 1))), FormatDuration(s.Period),
			formatRat(new(big.Rat).Mul(s.Budget(), big.NewRat(100, 1))), describeWindows(s, t)),
	}
	if s.Alerting.RunbookURL != "" {
		annotations["runbook_url"] = s.Alerting.RunbookURL
	}
	for k, v := range s.Alerting.Annotations {
		annotations[k] = v
	}
	r := Rule{Alert: s.Alerting.Name, Expr: expr, Labels: labels, Annotations: annotations}
	if t.For > 0 {
		r.For = FormatDuration(t.For)
	}
	return r
}

func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s + " "
}

// describeWindows says in words when the tier fires.
func describeWindows(s *SLO, t Tier) string {
	var parts []string
	for _, w := range t.Windows {
		f, _ := new(big.Rat).SetString(strconv.FormatFloat(w.Factor, 'g', -1, 64))
		threshold := new(big.Rat).Mul(f, new(big.Rat).Mul(s.Budget(), big.NewRat(100, 1)))
		parts = append(parts, fmt.Sprintf("above %sx the budget (%s%% bad) over both %s and %s (%.0f%% of the budget gone in %s)",
			strconv.FormatFloat(w.Factor, 'g', -1, 64), formatRat(threshold), FormatDuration(w.Long), FormatDuration(w.Short),
			100*w.BudgetShare(s.Period), FormatDuration(w.Long)))
	}
	out := "Fires when the error ratio is " + strings.Join(parts, ", or ")
	if t.MinEvents > 0 {
		unit := "events"
		if s.SLI.GoodMinutes != nil {
			unit = "counted minutes"
		}
		out += fmt.Sprintf(", with at least %d %s in the long window", t.MinEvents, unit)
	}
	return out + ". The value is the long window's burn rate."
}
