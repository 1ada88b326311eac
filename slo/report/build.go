package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

// Options are the report's parameters.
type Options struct {
	// At is the end of every window.
	At time.Time
	// Window overrides each SLO's period when non-zero.
	Window time.Duration
	// Location sets the calendar months; nil is UTC.
	Location *time.Location
	// Source names the API in the report and in errors (its URL); a
	// password in it is redacted (url.URL.Redacted).
	Source string
	// ScrapeInterval, when non-zero, is the interval gaps are judged
	// against (--scrape-interval); else Targets tells it, else the
	// samples.
	ScrapeInterval time.Duration
	// Targets lists the API's active scrape targets (TargetsFrom); nil,
	// or an error from it, leaves the interval to the samples.
	Targets TargetsFunc
	// FileWarnings go into the report as they are (LoadFile's).
	FileWarnings []string
}

// Target is an active scrape target: its job label and scrape interval.
type Target struct {
	Job            string
	ScrapeInterval time.Duration
}

// TargetsFunc returns the active scrape targets.
type TargetsFunc func(ctx context.Context) ([]Target, error)

// maxPoints is the most steps one range query asks for: Prometheus
// refuses more than 11,000 points per series ("exceeded maximum
// resolution of 11,000 points per timeseries"), Thanos and Mimir keep the
// limit.
const maxPoints = 10000

// QueryError is a failed query: the API, the SLO and the query are named.
type QueryError struct {
	Source, SLO, Query string
	Err                error
}

func (e *QueryError) Error() string {
	return fmt.Sprintf("%s: slo %s: query %q: %v", e.Source, e.SLO, e.Query, e.Err)
}

func (e *QueryError) Unwrap() error { return e.Err }

// Build queries api for every SLO of f and returns the report. On an
// error the report holds only the API's warnings gathered until then.
func Build(ctx context.Context, api v1.API, f *slo.File, o Options) (*Report, error) {
	loc := o.Location
	if loc == nil {
		loc = time.UTC
	}
	at := o.At.In(loc).Truncate(time.Millisecond)
	if u, err := url.Parse(o.Source); err == nil {
		o.Source = u.Redacted()
	}
	r := &Report{At: at, Source: o.Source, Timezone: loc.String(), SLOs: []SLO{}, Warnings: []string{}, FileWarnings: append([]string{}, o.FileWarnings...)}
	targets := &targetCache{list: o.Targets}
	for i := range f.SLOs {
		q := &querier{api: api, source: o.Source, slo: &f.SLOs[i], seen: map[string]bool{}}
		s, err := q.report(ctx, at, o.Window, loc, o.ScrapeInterval, targets)
		for _, w := range q.warnings {
			r.Warnings = append(r.Warnings, q.slo.ID()+": "+w)
		}
		if err != nil {
			// The warnings may say why (a store down behind Thanos).
			return &Report{Source: r.Source, Warnings: r.Warnings}, err
		}
		r.Partial = r.Partial || s.Partial
		r.SLOs = append(r.SLOs, s)
	}
	return r, nil
}

// targetCache asks for the targets once per report, when an SLO first
// needs them.
type targetCache struct {
	list    TargetsFunc
	done    bool
	targets []Target
}

func (c *targetCache) get(ctx context.Context) []Target {
	if !c.done && c.list != nil {
		// An API without the targets API (Mimir, a Thanos Query without
		// target stores) leaves the interval to the samples.
		c.targets, _ = c.list(ctx)
	}
	c.done = true
	return c.targets
}

// scrapeInterval is the interval gaps are judged against: the flag; else
// the largest scrape interval of the active targets of the SLI's jobs
// (the slowest target's samples are the sparsest: judged at a faster
// one's interval, each of its scrapes would leave a gap); else the
// samples' median spacing; else 1m.
func (q *querier) scrapeInterval(ctx context.Context, at time.Time, window time.Duration, flag time.Duration, targets *targetCache, ms *minutes) (time.Duration, string, error) {
	if flag > 0 {
		return flag, IntervalFlag, nil
	}
	if ts := targets.get(ctx); len(ts) > 0 {
		jobs, err := q.jobs(ctx, at, window)
		if err != nil {
			return 0, "", err
		}
		var longest time.Duration
		for _, t := range ts {
			if jobs[t.Job] {
				longest = max(longest, t.ScrapeInterval)
			}
		}
		if longest > 0 {
			return longest, IntervalTargets, nil
		}
	}
	if d := ms.sampleSpacing(); d > 0 {
		return d, IntervalSamples, nil
	}
	return minute, IntervalDefault, nil
}

// jobs are the job labels of the series the SLI reads in the window.
func (q *querier) jobs(ctx context.Context, at time.Time, window time.Duration) (map[string]bool, error) {
	var sels []string
	if gm := q.slo.SLI.GoodMinutes; gm != nil {
		s, err := selectorsOf(gm.CountWhen)
		if err != nil {
			return nil, err
		}
		sels = s
	} else {
		s, _, err := seriesSelectors(q.slo.SLI)
		if err != nil {
			return nil, err
		}
		sels = s
	}
	jobs := map[string]bool{}
	if len(sels) == 0 {
		return jobs, nil
	}
	counts := make([]string, len(sels))
	for i, s := range sels {
		counts[i] = "count_over_time(" + s + "[" + promDuration(window) + "])"
	}
	v, err := q.instant(ctx, "group by (job) ("+strings.Join(counts, " or ")+")", at)
	if err != nil {
		return nil, err
	}
	for _, s := range v {
		jobs[string(s.Metric["job"])] = true
	}
	return jobs, nil
}

// TargetsFrom lists the active targets of /api/v1/targets through c. The
// client_golang API drops scrapeInterval (its ActiveTarget has no such
// field), so the answer is read here.
func TargetsFrom(c api.Client) TargetsFunc {
	return func(ctx context.Context) ([]Target, error) {
		u := c.URL("/api/v1/targets", nil)
		u.RawQuery = "state=active"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, err
		}
		resp, body, err := c.Do(ctx, req) //nolint:bodyclose // api.Client.Do reads the body and closes it
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", u.Redacted(), resp.Status)
		}
		var answer struct {
			Data struct {
				ActiveTargets []struct {
					Labels         map[string]string `json:"labels"`
					ScrapeInterval string            `json:"scrapeInterval"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &answer); err != nil {
			return nil, fmt.Errorf("GET %s: %w", u.Redacted(), err)
		}
		var out []Target
		for _, t := range answer.Data.ActiveTargets {
			d, err := model.ParseDuration(t.ScrapeInterval)
			if err != nil || d <= 0 {
				continue
			}
			out = append(out, Target{Job: t.Labels["job"], ScrapeInterval: time.Duration(d)})
		}
		return out, nil
	}
}

// querier runs the queries of one SLO and keeps the API's warnings.
type querier struct {
	api      v1.API
	source   string
	slo      *slo.SLO
	warnings []string
	seen     map[string]bool
	// piece is the steps per range query: maxPoints, less once the API
	// refused that many samples.
	piece int
}

func (q *querier) fail(query string, err error) error {
	return &QueryError{Source: q.source, SLO: q.slo.ID(), Query: query, Err: err}
}

func (q *querier) warn(ws v1.Warnings) {
	for _, w := range ws {
		if !q.seen[w] {
			q.seen[w] = true
			q.warnings = append(q.warnings, w)
		}
	}
}

// instant runs an instant query and returns its samples.
func (q *querier) instant(ctx context.Context, query string, at time.Time) (model.Vector, error) {
	v, ws, _, err := q.api.Query(ctx, query, at)
	q.warn(ws)
	if err != nil {
		return nil, q.fail(query, err)
	}
	var vec model.Vector
	switch v := v.(type) {
	case model.Vector:
		vec = v
	case *model.Scalar:
		vec = model.Vector{{Value: v.Value, Timestamp: v.Timestamp}}
	default:
		return nil, q.fail(query, fmt.Errorf("result is %s, want a vector", resultType(v)))
	}
	for _, s := range vec {
		if err := finite(s.Metric, s.Value); err != nil {
			return nil, q.fail(query, err)
		}
	}
	return vec, nil
}

// resultType names the type of an answer's result for an error: an
// answer without data ({"status":"success"}) decodes to a nil
// model.Value, whose Type would panic (FuzzBuildFromAnswers, seed
// found-success-without-data).
func resultType(v model.Value) string {
	if v == nil {
		return "missing"
	}
	return "a " + v.Type().String()
}

// finite refuses NaN and ±Inf: 1 - NaN/total compares false with the
// objective and would read as met. A sum of counters' increases is never
// either; a ratio query that divides (x / 0) or a counter that overflowed
// is, and the report cannot count events from it.
func finite(m model.Metric, v model.SampleValue) error {
	if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("%w: %v for %s", ErrNonFinite, f, m)
	}
	return nil
}

// ErrNonFinite is a NaN or infinite value from the API.
var ErrNonFinite = errors.New("non-finite value")

// scalar runs an instant query that returns at most one sample (a sum
// without grouping): its value, and whether there was one.
func (q *querier) scalar(ctx context.Context, query string, at time.Time) (float64, bool, error) {
	v, err := q.instant(ctx, query, at)
	if err != nil || len(v) == 0 {
		return 0, false, err
	}
	if len(v) > 1 {
		return 0, false, q.fail(query, fmt.Errorf("%d series, want one", len(v)))
	}
	return float64(v[0].Value), true, nil
}

// tooManySamples is Prometheus' (and Thanos Query's) refusal of a query
// that would hold more than --query.max-samples (default 50,000,000)
// samples at once (promql.ErrTooManySamples). A range query over an
// unaggregated selector holds every series at every step: at 10,000
// steps, 5,000 series.
const tooManySamples = "query processing would load too many samples"

// minPiece is the fewest steps a range query is shrunk to: a limit that
// 10 steps exceed is not one the report can work under.
const minPiece = 10

// steps runs a query at every minute from first to last (inclusive), in
// pieces of at most maxPoints, and returns the value of the (single)
// series at each step. A piece the API refuses as too many samples is
// asked again in pieces a quarter as long, and the SLO's later range
// queries start at that size.
func (q *querier) steps(ctx context.Context, query string, first time.Time, n int) (vals []float64, has []bool, err error) {
	vals, has = make([]float64, n), make([]bool, n)
	if q.piece == 0 {
		q.piece = maxPoints
	}
	for lo := 0; lo < n; {
		hi := min(lo+q.piece, n)
		r := v1.Range{Start: first.Add(time.Duration(lo) * minute), End: first.Add(time.Duration(hi-1) * minute), Step: minute}
		v, ws, _, err := q.api.QueryRange(ctx, query, r)
		q.warn(ws)
		if err != nil && strings.Contains(err.Error(), tooManySamples) && q.piece/4 >= minPiece {
			q.piece /= 4
			continue
		}
		if err != nil {
			return nil, nil, q.fail(query, err)
		}
		m, ok := v.(model.Matrix)
		if !ok {
			return nil, nil, q.fail(query, fmt.Errorf("result is %s, want a matrix", resultType(v)))
		}
		if len(m) > 1 {
			return nil, nil, q.fail(query, fmt.Errorf("%d series, want one", len(m)))
		}
		for _, s := range m {
			for _, p := range s.Values {
				i := int(p.Timestamp.Time().Sub(first).Round(time.Millisecond) / minute)
				if err := finite(s.Metric, p.Value); err != nil {
					return nil, nil, q.fail(query, fmt.Errorf("at %s: %w", p.Timestamp.Time().UTC().Format(time.RFC3339), err))
				}
				if i >= 0 && i < n {
					vals[i], has[i] = float64(p.Value), true
				}
			}
		}
		lo = hi
	}
	return vals, has, nil
}

// promDuration writes a range for PromQL, in milliseconds precision.
func promDuration(d time.Duration) string {
	return model.Duration(d.Round(time.Millisecond)).String()
}

// counts returns the events of the range (end-d, end] and whether any
// series of the SLI had a sample.
//
// Latency: good = increase of the le="T" bucket, bad = increase of the
// threshold="T" counter. Ratio: the queries' rates over the range times
// its seconds. Good minutes: the rule's bad-minute expression evaluated
// at every minute (a subquery), bad minutes summed, counted minutes
// counted.
func (q *querier) counts(ctx context.Context, end time.Time, d time.Duration) (Events, bool, error) {
	rng := promDuration(d)
	var (
		e             Events
		goodOK, badOK bool
		err           error
	)
	switch sli := q.slo.SLI; {
	case sli.Latency != nil:
		good, bad, err := sli.Latency.Selectors()
		if err != nil {
			return e, false, err
		}
		if e.Good, goodOK, err = q.scalar(ctx, fmt.Sprintf("sum(%s)", slo.Dedup(fmt.Sprintf("increase(%s[%s])", good, rng))), end); err != nil {
			return e, false, err
		}
		if e.Bad, badOK, err = q.scalar(ctx, fmt.Sprintf("sum(%s)", slo.Dedup(fmt.Sprintf("increase(%s[%s])", bad, rng))), end); err != nil {
			return e, false, err
		}
		e.Total = e.Good + e.Bad
	case sli.Ratio != nil:
		errQ, totalQ := sli.Ratio.Queries(rng)
		secs := d.Seconds()
		if e.Bad, badOK, err = q.scalar(ctx, fmt.Sprintf("sum(%s) * %g", errQ, secs), end); err != nil {
			return e, false, err
		}
		if e.Total, goodOK, err = q.scalar(ctx, fmt.Sprintf("sum(%s) * %g", totalQ, secs), end); err != nil {
			return e, false, err
		}
		e.Good = e.Total - e.Bad
	case sli.GoodMinutes != nil:
		expr := sli.GoodMinutes.BadMinute()
		// Minutes are counted whole: a subquery of step 1m over the range.
		if e.Bad, badOK, err = q.scalar(ctx, fmt.Sprintf("sum_over_time((%s)[%s:1m])", expr, rng), end); err != nil {
			return e, false, err
		}
		if e.Total, goodOK, err = q.scalar(ctx, fmt.Sprintf("count_over_time((%s)[%s:1m])", expr, rng), end); err != nil {
			return e, false, err
		}
		e.Good = e.Total - e.Bad
	default:
		return e, false, errors.New("no indicator")
	}
	return e, goodOK || badOK, nil
}

// seriesSelectors are the series selectors an SLI reads: those of all
// events and those of bad events. A ratio SLI's are found in its queries.
func seriesSelectors(sli slo.SLI) (total, bad []string, err error) {
	switch {
	case sli.Latency != nil:
		good, b, err := sli.Latency.Selectors()
		if err != nil {
			return nil, nil, err
		}
		return []string{good, b}, []string{b}, nil
	case sli.Ratio != nil:
		errQ, totalQ := sli.Ratio.Queries("1m")
		if total, err = selectorsOf(totalQ); err != nil {
			return nil, nil, err
		}
		if bad, err = selectorsOf(errQ); err != nil {
			return nil, nil, err
		}
		return total, bad, nil
	}
	return nil, nil, nil
}

// selectorsOf lists the vector selectors of a PromQL expression, each once.
func selectorsOf(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", expr, err)
	}
	var sels []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			// The series, not the time: "x offset 1m[1m]" does not
			// parse, and x's samples are what a minute holds.
			plain := *vs
			plain.OriginalOffset, plain.Offset, plain.Timestamp, plain.StartOrEnd = 0, 0, nil, 0
			if str := plain.String(); !slices.Contains(sels, str) {
				sels = append(sels, str)
			}
		}
		return nil
	})
	return sels, nil
}

// minuteSeries reads the SLI minute by minute over the window.
//
// Latency and ratio SLIs: a minute is present when one of the series the
// SLI reads has a sample in it (count_over_time over 1m), and its events
// are the increases of the sums of those series (the usual 5m lookback, so
// a minute without a scrape does not read as a drop). For a ratio SLI
// these are exact when its queries are sums of rates of counters (the
// usual shape) and only draw the chart and find quiet runs otherwise.
// Good-minutes SLIs: the rule's bad-minute expression at every minute; a
// minute is present when countWhen's series have a sample in it, and one
// that is present but does not count has no event (zero traffic).
func (q *querier) minuteSeries(ctx context.Context, first time.Time, n int, window Events) (*minutes, error) {
	m := &minutes{first: first, bad: make([]float64, n), total: make([]float64, n)}
	if gm := q.slo.SLI.GoodMinutes; gm != nil {
		bv, counted, err := q.steps(ctx, gm.BadMinute(), first, n)
		if err != nil {
			return nil, err
		}
		// Present: a sample of countWhen's series in the minute (the
		// issue's "sample of the SLI's total series"); a present minute
		// that does not count is zero traffic, not a gap. A countWhen
		// without a selector (vector(1)) has only its counted minutes.
		sels, err := selectorsOf(gm.CountWhen)
		if err != nil {
			return nil, err
		}
		// A minute counted through the 5m lookback without a sample of
		// its own is still in a gap: the 3h gap of the e2e history
		// would otherwise read as 2h56m.
		m.present = counted
		if len(sels) > 0 {
			if m.present, err = q.presence(ctx, sels, first, n); err != nil {
				return nil, err
			}
		}
		for i := range n {
			if counted[i] {
				m.bad[i], m.total[i] = bv[i], 1
			}
		}
		return m, nil
	}
	total, bad, err := seriesSelectors(q.slo.SLI)
	if err != nil {
		return nil, err
	}
	if len(total) == 0 {
		return nil, fmt.Errorf("slo %s: the total query reads no series", q.slo.ID())
	}
	if m.present, err = q.presence(ctx, total, first, n); err != nil {
		return nil, err
	}
	// An errorQuery that is not a sum of counters' rates (total - good,
	// a ratio, a quantile) cannot be split into its selectors' increases:
	// the window's bad events are spread over its events instead.
	if r := q.slo.SLI.Ratio; r != nil {
		errQ, _ := r.Queries("1m")
		if !sumOfRates(errQ) {
			bad, m.apportioned = nil, true
		}
	}
	inc := map[string][]float64{}
	for _, s := range append(slices.Clone(total), bad...) {
		if inc[s] != nil {
			continue
		}
		v, has, err := q.steps(ctx, "sum("+s+")", first, n)
		if err != nil {
			return nil, err
		}
		inc[s] = increases(v, has)
	}
	for i := range n {
		for _, s := range total {
			m.total[i] += inc[s][i]
		}
		for _, s := range bad {
			m.bad[i] += inc[s][i]
		}
		if m.apportioned && window.Total > 0 {
			m.bad[i] = m.total[i] * window.Bad / window.Total
		}
	}
	return m, nil
}

// sumOfRates reports whether expr only adds up rates or increases of
// counters (sum, +, rate, increase, parentheses), so that its bad events
// are the increases of its selectors.
func sumOfRates(expr string) bool {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return false
	}
	ok := true
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.BinaryExpr:
			ok = ok && n.Op == parser.ADD
		case *parser.AggregateExpr:
			ok = ok && n.Op == parser.SUM
		case *parser.Call:
			ok = ok && (n.Func.Name == "rate" || n.Func.Name == "increase")
		case *parser.SubqueryExpr, *parser.NumberLiteral, *parser.StringLiteral, *parser.UnaryExpr:
			ok = false
		}
		return nil
	})
	return ok
}

// presence is, for each minute, whether one of the selectors' series has a
// sample in it: count_over_time over 1m, (t-1m, t].
func (q *querier) presence(ctx context.Context, sels []string, first time.Time, n int) ([]bool, error) {
	counts := make([]string, len(sels))
	for i, s := range sels {
		counts[i] = "count_over_time(" + s + "[1m])"
	}
	_, present, err := q.steps(ctx, "group("+strings.Join(counts, " or ")+")", first, n)
	return present, err
}

// worst ranks label values by bad events over the window.
func (q *querier) worst(ctx context.Context, at time.Time, window time.Duration, allBad float64) (Worst, error) {
	w := Worst{Namespaces: []Contributor{}, Kinds: []Contributor{}, Stages: []Contributor{}}
	var badExpr func(by string) string
	var labels []string
	switch sli := q.slo.SLI; {
	case sli.Latency != nil:
		m, _ := slo.LookupLatencyMetric(sli.Latency.Metric)
		_, bad, err := sli.Latency.Selectors()
		if err != nil {
			return w, err
		}
		badExpr = func(by string) string {
			return fmt.Sprintf("sum by (%s) (%s)", by, slo.Dedup(fmt.Sprintf("increase(%s[%s])", bad, promDuration(window))))
		}
		for _, l := range []string{"namespace", "kind", "owner_kind", "stage"} {
			if !m.HasLabel(l) || (l == "stage" && len(sli.Latency.Match["stage"]) == 1) {
				continue
			}
			labels = append(labels, l)
		}
	case sli.Ratio != nil:
		// Only when the error query keeps a namespace label.
		errQ, _ := sli.Ratio.Queries(promDuration(window))
		badExpr = func(by string) string { return fmt.Sprintf("sum by (%s) (%s) * %g", by, errQ, window.Seconds()) }
		labels = []string{"namespace"}
	default:
		return w, nil
	}
	for _, l := range labels {
		v, err := q.instant(ctx, badExpr(l), at)
		if err != nil {
			return w, err
		}
		bad := map[string]float64{}
		for _, s := range v {
			if val := string(s.Metric[model.LabelName(l)]); val != "" {
				bad[val] += float64(s.Value)
			}
		}
		switch l {
		case "namespace":
			w.Namespaces = top(bad, allBad)
		case "kind", "owner_kind":
			w.Kinds = top(bad, allBad)
		case "stage":
			w.Stages = top(bad, allBad)
		}
	}
	return w, nil
}

func (q *querier) report(ctx context.Context, at time.Time, window time.Duration, loc *time.Location, flagInterval time.Duration, targets *targetCache) (SLO, error) {
	s := q.slo
	if window == 0 {
		window = s.Period
	}
	obj := s.ObjectiveFloat()
	budget, _ := s.Budget().Float64()
	r := SLO{
		ID: s.ID(), Service: s.Service, Name: s.Name, Description: s.Description, SLI: s.SLI.String(),
		Objective: obj, Window: formatDuration(window), Start: at.Add(-window), End: at,
		BurnRates: []BurnRate{}, Months: []Month{},
	}

	// The headline: events over the whole window.
	e, present, err := q.counts(ctx, at, window)
	if err != nil {
		return r, err
	}
	r.Events, r.Status, r.Attainment, r.Budget = e, status(e, present, obj), attainment(e), budgetOf(e, budget)

	recent, _, err := q.counts(ctx, at, recentWindow)
	if err != nil {
		return r, err
	}

	// The kept alert window pairs of both tiers, as the rules have them.
	for _, t := range []struct {
		name string
		tier slo.Tier
	}{{slo.TierPage, s.Alerting.Page}, {slo.TierTicket, s.Alerting.Ticket}} {
		if !t.tier.Enabled {
			continue
		}
		for _, w := range t.tier.Windows {
			long, _, err := q.counts(ctx, at, w.Long)
			if err != nil {
				return r, err
			}
			short, _, err := q.counts(ctx, at, w.Short)
			if err != nil {
				return r, err
			}
			r.BurnRates = append(r.BurnRates, BurnRate{
				Tier: t.name, Long: slo.FormatDuration(w.Long), Short: slo.FormatDuration(w.Short), Factor: w.Factor,
				LongRate: burnRate(long, budget), ShortRate: burnRate(short, budget), LongEvents: long.Total, MinEvents: t.tier.MinEvents,
			})
		}
	}
	r.FiringTier = firing(r.BurnRates)

	if r.Worst, err = q.worst(ctx, at, window, e.Bad); err != nil {
		return r, err
	}

	for _, m := range months(r.Start, at, loc) {
		me, mp, err := q.counts(ctx, m.end, m.end.Sub(m.start))
		if err != nil {
			return r, err
		}
		r.Months = append(r.Months, Month{Month: m.label, Start: m.start, End: m.end, Events: me, Attainment: attainment(me), Status: status(me, mp, obj)})
	}

	// Minute by minute: gaps, zero traffic, the chart.
	n := int(window / minute)
	first := at.Add(-time.Duration(n-1) * minute)
	ms, err := q.minuteSeries(ctx, first, n, e)
	if err != nil {
		return r, err
	}
	interval, source, err := q.scrapeInterval(ctx, at, window, flagInterval, targets, ms)
	if err != nil {
		return r, err
	}
	minSteps := gapSteps(interval)
	r.ScrapeInterval = ScrapeInterval{Interval: formatDuration(interval), Source: source, MinGap: formatDuration(time.Duration(minSteps) * minute)}
	r.Gaps, r.GapsOmitted = boundGaps(ms.gaps(minSteps, loc), MaxGapRows)
	r.ZeroTraffic = ms.zeroTraffic(minSteps, loc)

	r.Exhaustion = exhaustionOf(at, window, r.Budget, recent, budget)
	if r.Exhaustion.State == ExhaustionExhausted {
		r.Exhaustion.Since = ms.budgetSpentAt(r.Budget.Total, e.Bad, loc)
	}
	step := chartStep(window)
	r.Chart = Chart{Step: formatDuration(time.Duration(step) * minute), Points: ms.chart(step, budget, loc), BadApportioned: ms.apportioned}
	r.Start, r.End = r.Start.In(loc), r.End.In(loc)
	r.Warnings = slices.Clone(q.warnings)
	if r.Warnings == nil {
		r.Warnings = []string{}
	}
	r.Partial = len(r.Warnings) > 0
	return r, nil
}
