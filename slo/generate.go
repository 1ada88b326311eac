package slo

import (
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
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

// ReplicaLabels are the target labels in which two HA replicas of the
// exporter differ while exporting the same series: the address Prometheus
// scrapes and, under prometheus-operator, the pod. Every other label
// (job, namespace of the series, service, endpoint, container) is the
// same for both.
var ReplicaLabels = []string{"instance", "pod"}

// Dedup folds the replicas of the exporter into one series: max without
// (instance, pod). Max, not sum: each replica counts every event, and two
// replicas' counters differ a little (they started at different times),
// so the rate or increase of the replica that saw the most stands for
// the event count; a replica that is down or restarting is covered by
// its twin. Shards keep apart: the families the SLIs read carry the
// namespace, and each shard owns other namespaces.
func Dedup(expr string) string {
	return "max without (" + strings.Join(ReplicaLabels, ", ") + ") (" + expr + ")"
}

// DefaultSelector selects the exporter's scrape targets: the job the
// ServiceMonitor of deploy/ gives them (prometheus-operator names the job
// after the Service, or after the label its jobLabel names).
const DefaultSelector = `job="kube-convergence-exporter"`

// Options are the generator's parameters; the zero value is the default.
type Options struct {
	// Selector is a list of label matchers, without braces, that selects
	// the exporter's targets in `up` and in its own metrics: the
	// no-events tickets and the exporter alerts read it. Empty means
	// DefaultSelector.
	Selector string
	// ExporterAlerts adds the group ExporterGroup: the exporter is absent,
	// down or serving incomplete metrics. The bundled rules have it; a
	// user's SLO file next to them does not need it twice.
	ExporterAlerts bool
	// GroupBy are labels every sum keeps and every join matches on, for a
	// central ruler (Thanos, Mimir) that evaluates the rules of several
	// clusters at once: ["cluster"] gives sum by (cluster) and
	// and on (cluster). Empty: one Prometheus per cluster.
	GroupBy []string
	// DashboardURL is the dashboard_url annotation of every burn-rate and
	// no-events alert whose SLO does not set its own (e.g. /d/<uid> of the
	// dashboard `slo generate --dashboards` writes). Empty: none.
	DashboardURL string
}

// ExporterGroup is the name of the group of exporter alerts.
const ExporterGroup = "kube-convergence-exporter-scrape"

func (o Options) selector() string {
	if strings.TrimSpace(o.Selector) == "" {
		return DefaultSelector
	}
	return strings.TrimSpace(o.Selector)
}

// CheckSelector reports whether sel is a valid list of label matchers
// that cannot match every series.
func CheckSelector(sel string) error {
	if strings.ContainsAny(sel, "{}") {
		return fmt.Errorf("selector %q: write the matchers without braces, e.g. %s", sel, DefaultSelector)
	}
	ms, err := parser.NewParser(parser.Options{}).ParseMetricSelector("up{" + sel + "}")
	if err != nil {
		return fmt.Errorf("selector %q: %w", sel, err)
	}
	for _, m := range ms {
		if m.Name != "__name__" && !m.Matches("") {
			return nil
		}
	}
	return fmt.Errorf("selector %q matches every target; want at least one matcher that needs a value, such as %s", sel, DefaultSelector)
}

// Generate renders the rules of every SLO of f with the default options.
func Generate(f *File) (*RuleFile, error) { return GenerateWith(f, Options{}) }

// GenerateWith renders the rules of every SLO of f: one group per SLO,
// holding its recording rules, then its alerts; then, with
// o.ExporterAlerts, the exporter's own alerts.
func GenerateWith(f *File, o Options) (*RuleFile, error) {
	if err := CheckSelector(o.selector()); err != nil {
		return nil, err
	}
	for _, l := range o.GroupBy {
		if !labelName.MatchString(l) || strings.HasPrefix(l, "__") || reservedLabel(l) || l == "le" {
			return nil, fmt.Errorf("group-by %q: not a label the rules can group by", l)
		}
	}
	rf := &RuleFile{}
	for i := range f.SLOs {
		g, err := generateSLO(&f.SLOs[i], o)
		if err != nil {
			return nil, fmt.Errorf("%s: slo %q: %w", position(f.Name, f.SLOs[i].Line), f.SLOs[i].Name, err)
		}
		rf.Groups = append(rf.Groups, g)
	}
	if o.ExporterAlerts {
		rf.Groups = append(rf.Groups, o.aggregation().exporterGroup())
	}
	return rf, nil
}

func generateSLO(s *SLO, o Options) (RuleGroup, error) {
	a := o.aggregation()
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
		// Replicas first (each HA replica counts every event), then
		// shards (disjoint namespaces: their series differ in namespace).
		good := a.sum(Dedup(fmt.Sprintf("rate(%s[5m])", l.goodSelector(m))))
		bad := a.sum(Dedup(fmt.Sprintf("rate(%s[5m])", l.badSelector(m))))
		g.Rules = append(g.Rules,
			Rule{Record: RecordBadRate, Expr: a.orZero(bad), Labels: base},
			Rule{Record: RecordTotalRate, Expr: "(" + a.orZero(good) + ")\n+\n(" + a.orZero(bad) + ")", Labels: base},
		)
	case s.SLI.Ratio != nil:
		r := s.SLI.Ratio
		g.Rules = append(g.Rules,
			Rule{Record: RecordBadRate, Expr: a.orZero(a.sum(withWindow(r.ErrorQuery, "5m"))), Labels: base},
			Rule{Record: RecordTotalRate, Expr: a.orZero(a.sum(withWindow(r.TotalQuery, "5m"))), Labels: base},
		)
	case s.SLI.GoodMinutes != nil:
		gm := s.SLI.GoodMinutes
		minute := sel(RecordBadMinute)
		// Evaluated at every rule evaluation over the last minute: with an
		// interval of 30 s an event is seen by 2 evaluations out of 2 per
		// minute, so the ratio is the fraction of minutes whatever the
		// interval.
		g.Rules = append(g.Rules,
			Rule{Record: RecordBadMinute, Expr: a.badMinute(strings.TrimSpace(gm.BadWhen), strings.TrimSpace(gm.CountWhen)), Labels: labels()},
			// bad minutes per second: the fraction of bad minutes / 60 s.
			Rule{Record: RecordBadRate, Expr: a.orZero(fmt.Sprintf("%s / %s / 60", a.sum("sum_over_time("+minute+"[5m])"), a.sum("count_over_time("+minute+"[5m])"))), Labels: base},
			// counted minutes per second: 1/60 while minutes count.
			Rule{Record: RecordTotalRate, Expr: a.orZero(fmt.Sprintf("clamp_max(%s, 1) / 60", a.sum("count_over_time("+minute+"[5m])"))), Labels: base},
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
		g.Rules = append(g.Rules, Rule{Record: RecordErrorRatioPrefix + FormatDuration(w), Expr: a.errorRatio(sel, w), Labels: labels(labelWindow, FormatDuration(w))})
	}
	g.Rules = append(g.Rules, Rule{Record: RecordErrorRatioPeriod, Expr: a.errorRatio(sel, s.Period), Labels: labels(labelWindow, FormatDuration(s.Period))})
	if s.Period == 30*Day {
		g.Rules = append(g.Rules, Rule{Record: sloth30dAlias, Expr: sel(RecordErrorRatioPeriod), Labels: labels(labelWindow, "30d")})
	}

	// 3. Metadata (Sloth's).
	days := strconv.FormatFloat(s.Period.Hours()/24, 'g', -1, 64)
	g.Rules = append(g.Rules,
		Rule{Record: RecordObjective, Expr: "vector(" + formatRat(s.Objective) + ")", Labels: labels()},
		Rule{Record: RecordErrorBudget, Expr: "vector(" + budget + ")", Labels: labels()},
		Rule{Record: RecordPeriodDays, Expr: "vector(" + days + ")", Labels: labels()},
		Rule{Record: RecordCurrentBurnRate, Expr: fmt.Sprintf("%s / %s", a.sum(sel(RecordErrorRatioPrefix+"5m")), budget), Labels: labels()},
		Rule{Record: RecordPeriodBurnRate, Expr: fmt.Sprintf("%s / %s", a.sum(sel(RecordErrorRatioPeriod)), budget), Labels: labels()},
		Rule{Record: RecordBudgetRemaining, Expr: fmt.Sprintf("1 - %s", a.sum(sel(RecordPeriodBurnRate))), Labels: labels()},
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
		g.Rules = append(g.Rules, a.alertRule(s, t.name, t.tier, sel))
	}
	defer func() {
		for i := range g.Rules {
			if r := &g.Rules[i]; r.Alert != "" && o.DashboardURL != "" && r.Annotations["dashboard_url"] == "" {
				r.Annotations["dashboard_url"] = o.DashboardURL
			}
		}
	}()
	if s.Alerting.NoEvents.Enabled {
		g.Rules = append(g.Rules, a.noEventsRule(s, sel))
	}

	// Two rules recording one series (an explicit 30d window of a 30d
	// SLO and Sloth's 30d alias) make Prometheus fail every evaluation of
	// the second with "duplicate sample for timestamp".
	seen := map[string]bool{}
	for _, r := range g.Rules {
		if r.Record == "" {
			continue
		}
		key := r.Record + "{" + r.Labels[labelWindow] + "}"
		if seen[key] {
			return g, fmt.Errorf("the rules record %s{%s=%q} twice: an alert window equal to the period (%s) is already recorded as the period's ratio; drop that window or change the period",
				r.Record, labelWindow, r.Labels[labelWindow], FormatDuration(s.Period))
		}
		seen[key] = true
	}
	for _, r := range g.Rules {
		if err := checkPromQL(r.Expr); err != nil {
			return g, fmt.Errorf("generated rule %s%s: %w", r.Record, r.Alert, err)
		}
	}
	return g, nil
}

// aggregation renders the sums and joins of the rules: over everything
// (one Prometheus per cluster), or by the GroupBy labels (a central ruler,
// Thanos or Mimir, where every series carries a cluster label).
type aggregation struct {
	by       []string
	selector string
}

func (o Options) aggregation() aggregation {
	return aggregation{by: o.GroupBy, selector: o.selector()}
}

func (a aggregation) labels() string { return strings.Join(a.by, ", ") }

// sum is sum(expr), or sum by (cluster) (expr).
func (a aggregation) sum(expr string) string { return a.agg("sum", expr) }

func (a aggregation) agg(op, expr string) string {
	if len(a.by) == 0 {
		return op + "(" + expr + ")"
	}
	return op + " by (" + a.labels() + ") (" + expr + ")"
}

// on is the matching clause of a join: on (), or on (cluster).
func (a aggregation) on() string { return "on (" + a.labels() + ")" }

// orZero makes an absent result 0: `or on ()` because the result of a sum
// without grouping has no labels, and vector(0) must not be added beside a
// result that has some. Grouped, there is one 0 per group where the
// exporter is scraped (its up series name the groups): vector(0) has no
// cluster label to join on.
func (a aggregation) orZero(expr string) string {
	if len(a.by) == 0 {
		return expr + "\nor on () vector(0)"
	}
	return expr + "\nor " + a.on() + " (0 * " + a.agg("group", "up{"+a.selector+"}") + ")"
}

// badMinute is 1 in a minute where badWhen returns a sample, 0 in one where
// only countWhen does, absent otherwise.
func (a aggregation) badMinute(badWhen, countWhen string) string {
	if len(a.by) == 0 {
		return fmt.Sprintf("(vector(1) and on () (%s))\nor on ()\n(vector(0) and on () (%s))", badWhen, countWhen)
	}
	return fmt.Sprintf("%s\nor %s\n(0 * %s)", a.agg("group", badWhen), a.on(), a.agg("group", countWhen))
}

// errorRatio is bad / total over w from the 5m records. sum() around each
// side folds series whose labels changed within the window (a relabelled
// SLO must not break its long windows); the denominator's `> 0` makes zero
// traffic give no sample instead of NaN.
func (a aggregation) errorRatio(sel func(string) string, w time.Duration) string {
	if w == baseWindow {
		return fmt.Sprintf("%s\n/\n(%s > 0)", a.sum(sel(RecordBadRate)), a.sum(sel(RecordTotalRate)))
	}
	r := FormatDuration(w)
	return fmt.Sprintf("%s\n/\n(%s > 0)", a.sum("sum_over_time("+sel(RecordBadRate)+"["+r+"])"), a.sum("sum_over_time("+sel(RecordTotalRate)+"["+r+"])"))
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
func (a aggregation) eventsIn(sel func(string) string, w time.Duration) string {
	return fmt.Sprintf("%s * 60", a.sum(fmt.Sprintf("sum_over_time(%s[%s:1m])", sel(RecordTotalRate), FormatDuration(w))))
}

func (a aggregation) alertRule(s *SLO, tier string, t Tier, sel func(string) string) Rule {
	budget := formatRat(s.Budget())
	var pairs []string
	for _, w := range t.Windows {
		factor := strconv.FormatFloat(w.Factor, 'g', -1, 64)
		conds := []string{
			fmt.Sprintf("(%s / %s > %s)", sel(RecordErrorRatioPrefix+FormatDuration(w.Long)), budget, factor),
			fmt.Sprintf("(%s / %s > %s)", sel(RecordErrorRatioPrefix+FormatDuration(w.Short)), budget, factor),
		}
		if t.MinEvents > 0 {
			conds = append(conds, fmt.Sprintf("(%s >= %d)", a.eventsIn(sel, w.Long), t.MinEvents))
		}
		pairs = append(pairs, "  (\n    "+strings.Join(conds, "\n    and "+a.on()+"\n    ")+"\n  )")
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

// noEventsRule is the ticket for an SLI that has counted no event for
// NoEvents.For while the exporter was up. The condition reads one hour of
// the 5m event rate, and `for` makes it hold for the whole duration: a
// scrape gap or an exporter restart (up == 0) starts the count again, so
// the ticket means "measured, and saw nothing", never "could not measure"
// (KubeConvergenceExporterAbsent covers that).
func (a aggregation) noEventsRule(s *SLO, sel func(string) string) Rule {
	selector := a.selector
	name := strings.TrimSuffix(s.Alerting.Name, "BudgetBurn") + "NoEvents"
	// The SLO's identity, as the burn-rate alerts carry it from their
	// records (the sums here drop every label).
	labels := map[string]string{}
	for k, v := range s.Labels {
		labels[k] = v
	}
	labels[labelID], labels[labelService], labels[labelSLO] = s.ID(), s.Service, s.Name
	for k, v := range s.Alerting.Labels {
		labels[k] = v
	}
	labels["severity"] = "warning"
	unit := "events"
	if s.SLI.GoodMinutes != nil {
		unit = "counted minutes"
	}
	annotations := map[string]string{
		"summary": fmt.Sprintf("%s/%s: no %s for %s while the exporter is up", s.Service, s.Name, unit, FormatDuration(s.Alerting.NoEvents.For)),
		"description": fmt.Sprintf("The SLI of %s (%s) counted no %s for %s although the exporter (up{%s}) was scraped: "+
			"its burn-rate alerts cannot fire. Either nothing happened (a quiet cluster: silence or disable with alerting.noEvents), "+
			"or its selectors match nothing: a label renamed by the scrape (exported_namespace when the ServiceMonitor lacks honorLabels: true), "+
			"a match value the exporter does not expose, or a collector that is disabled (kube_convergence_collector_up).",
			s.Name, s.SLI, unit, FormatDuration(s.Alerting.NoEvents.For), selector),
	}
	if s.Alerting.RunbookURL != "" {
		annotations["runbook_url"] = s.Alerting.RunbookURL
	}
	for k, v := range s.Alerting.Annotations {
		annotations[k] = v
	}
	return Rule{
		Alert: name,
		Expr: fmt.Sprintf("(%s == 0)\nand %s\n(%s > 0)",
			a.sum("max_over_time("+sel(RecordTotalRate)+"[1h])"), a.on(), a.agg("count", "up{"+selector+"} == 1")),
		For:         FormatDuration(s.Alerting.NoEvents.For),
		Labels:      labels,
		Annotations: annotations,
	}
}

// exporterGroup holds the alerts on the exporter's scrape: absent, down,
// incomplete. `absent(up{...} == 1)` and not `up == 0`: when the target is
// gone (a ServiceMonitor that selects nothing, a namespace overlay, a
// deleted Service) there is no up series to be 0, and the SLO rules read
// no data as no traffic.
//
// Grouped by cluster, absent() cannot say which cluster lost its exporter:
// the alert is then per group, for the groups that had an up series in the
// last day and have no target up now (it resolves a day after the target
// disappeared, or when it is back).
func (a aggregation) exporterGroup() RuleGroup {
	selector := a.selector
	absentExpr := fmt.Sprintf("absent(up{%s} == 1)", selector)
	if len(a.by) > 0 {
		absentExpr = fmt.Sprintf("%s\nunless %s\n%s", a.agg("group", "max_over_time(up{"+selector+"}[1d])"), a.on(), a.agg("group", "up{"+selector+"} == 1"))
	}
	runbook := func(alert string) string {
		return "https://github.com/kube-convergence/kube-convergence-exporter/blob/main/docs/runbooks.md#" + strings.ToLower(alert)
	}
	const dashboard = "/d/kce-exporter"
	return RuleGroup{Name: ExporterGroup, Rules: []Rule{
		{
			Alert:  "KubeConvergenceExporterAbsent",
			Expr:   absentExpr,
			For:    "15m",
			Labels: map[string]string{"severity": "warning"},
			Annotations: map[string]string{
				"summary": "kube-convergence-exporter has not been scraped successfully for 15 minutes",
				"description": fmt.Sprintf("No target matching up{%s} was up for 15 minutes: it is down, or Prometheus no longer discovers it "+
					"(ServiceMonitor selector or namespace, Service, RBAC of Prometheus). Convergence metrics, stuck-rollout alerts and SLO burn rates "+
					"are blind meanwhile: the SLIs count no events, not bad ones.", selector),
				"runbook_url":   runbook("KubeConvergenceExporterAbsent"),
				"dashboard_url": dashboard,
			},
		},
		{
			Alert:  "KubeConvergenceExporterDown",
			Expr:   fmt.Sprintf("up{%s} == 0", selector),
			For:    "5m",
			Labels: map[string]string{"severity": "warning"},
			Annotations: map[string]string{
				"summary": "kube-convergence-exporter {{ $labels.instance }} cannot be scraped",
				"description": "Prometheus has failed to scrape {{ $labels.instance }} (job {{ $labels.job }}) for 5 minutes: convergence metrics, " +
					"stuck-rollout alerts and SLO burn rates are blind meanwhile (the SLIs count no events, they do not count bad ones).",
				"runbook_url":   runbook("KubeConvergenceExporterDown"),
				"dashboard_url": dashboard,
			},
		},
		{
			// A collector or the encoder failed during a scrape: the
			// scrape succeeded (up == 1) with some metrics missing.
			Alert:  "KubeConvergenceExporterScrapeErrors",
			Expr:   fmt.Sprintf("increase(promhttp_metric_handler_errors_total{%s}[10m]) > 0", selector),
			Labels: map[string]string{"severity": "warning"},
			Annotations: map[string]string{
				"summary": "kube-convergence-exporter {{ $labels.instance }} serves incomplete metrics ({{ $labels.cause }} errors)",
				"description": "{{ printf \"%.0f\" $value }} scrape(s) of {{ $labels.instance }} in the last 10 minutes failed while " +
					"{{ $labels.cause }} metrics; the exporter's log names the failing collector.",
				"runbook_url":   runbook("KubeConvergenceExporterScrapeErrors"),
				"dashboard_url": dashboard,
			},
		},
	}}
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
