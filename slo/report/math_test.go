package report

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

func TestStatusAndAttainment(t *testing.T) {
	for _, c := range []struct {
		name      string
		e         Events
		present   bool
		objective float64
		want      string
		att       *float64
	}{
		{"no series", Events{}, false, 0.99, StatusNoData, nil},
		{"series, no events: never 100%", Events{}, true, 0.99, StatusNoEvents, nil},
		{"exactly at the objective is met", Events{Good: 99, Bad: 1, Total: 100}, true, 0.99, StatusMet, ptr(0.99)},
		{"one bad event more breaches", Events{Good: 98, Bad: 2, Total: 100}, true, 0.99, StatusBreached, ptr(0.98)},
		{"event-weighted, not averaged per series", Events{Good: 999, Bad: 1, Total: 1000}, true, 0.999, StatusMet, ptr(0.999)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := status(c.e, c.present, c.objective); got != c.want {
				t.Errorf("status %q, want %q", got, c.want)
			}
			got := attainment(c.e)
			if (got == nil) != (c.att == nil) || (got != nil && *got != *c.att) {
				t.Errorf("attainment %v, want %v", deref(got), deref(c.att))
			}
		})
	}
}

func near(p *float64, want any) bool {
	if p == nil || want == nil {
		return p == nil && want == nil
	}
	return math.Abs(*p-want.(float64)) < 1e-12
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestBudget(t *testing.T) {
	// 10,000 events at 99%: a budget of 100 events.
	b := budgetOf(Events{Good: 9975, Bad: 25, Total: 10000}, 0.01)
	if b.Total != 100 || b.Consumed != 25 || b.Remaining != 75 || *b.RemainingRatio != 0.75 {
		t.Fatalf("budget %+v (remaining ratio %v), want 100, 25, 75, 0.75", b, *b.RemainingRatio)
	}
	if b := budgetOf(Events{}, 0.01); b.RemainingRatio != nil {
		t.Errorf("no events: remaining ratio %v, want none", *b.RemainingRatio)
	}
}

// TestExhaustion: the date is at + B / r, B the remaining budget in
// events, r the bad events of the last day per day; "not at this rate"
// when r is 0 or B / r is not shorter than the window.
func TestExhaustion(t *testing.T) {
	at := time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)
	window := 30 * slo.Day
	// 10,000 events in the window at a 2% budget: 200 events allowed.
	win := func(bad float64) Events { return Events{Good: 10000 - bad, Bad: bad, Total: 10000} }
	day := func(bad, total float64) Events { return Events{Good: total - bad, Bad: bad, Total: total} }
	for _, c := range []struct {
		name       string
		window     Events
		budget     float64
		day        Events
		state      string
		after      time.Duration
		burnRate1d *float64
	}{
		// The case: 100 allowed at 1%, 82 bad: 18 left; the last
		// day 20 bad of 3,333.3 events (ten times the window's average
		// traffic, an error ratio of 0.6%: 0.6x). 18 / 20 per day = 0.9d
		// = 21h36m. (The ratio formula said 0.18 x 30d / 0.6 = 9 days.)
		{"18 left, 20 bad yesterday", Events{Good: 9918, Bad: 82, Total: 10000}, 0.01, day(20, 10000.0/3), ExhaustionProjected, 21*time.Hour + 36*time.Minute, ptr(0.6)},
		// 100 of 200 left, 40 bad in the last day: 100 / 40 = 2.5d.
		{"100 left at 40 a day", win(100), 0.02, day(40, 1000), ExhaustionProjected, 2*slo.Day + 12*time.Hour, ptr(2.0)},
		// 150 of 200 left at 6 a day: 25d, inside the 30d window.
		{"150 left at 6 a day", win(50), 0.02, day(6, 1000), ExhaustionProjected, 25 * slo.Day, ptr(0.3)},
		// 1x with the whole budget (200 / 30 = 6.67 bad a day at 333.3
		// events a day): 200 / 6.67 = 30d, the window's end, not before.
		{"1x, the whole budget", win(0), 0.02, day(200.0/30, 10000.0/30), ExhaustionNever, 0, ptr(1.0)},
		// 150 left at 4 a day: 37.5d, beyond the window.
		{"150 left at 4 a day", win(50), 0.02, day(4, 1000), ExhaustionNever, 0, ptr(0.2)},
		{"a clean last day", win(100), 0.02, day(0, 1000), ExhaustionNever, 0, ptr(0.0)},
		{"no events in the last day", win(100), 0.02, Events{}, ExhaustionNever, 0, nil},
		{"overspent", win(300), 0.02, day(0, 1000), ExhaustionExhausted, 0, ptr(0.0)},
		{"exactly spent", win(200), 0.02, day(40, 1000), ExhaustionExhausted, 0, ptr(2.0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := exhaustionOf(at, window, budgetOf(c.window, c.budget), c.day, c.budget)
			if x.State != c.state {
				t.Fatalf("state %q, want %q", x.State, c.state)
			}
			if want := at.Add(c.after); (x.At == nil) != (c.after == 0) || (x.At != nil && !x.At.Equal(want)) {
				t.Errorf("at %v, want %v", x.At, want)
			}
			if (x.BurnRate1d == nil) != (c.burnRate1d == nil) || (x.BurnRate1d != nil && math.Abs(*x.BurnRate1d-*c.burnRate1d) > 1e-9) {
				t.Errorf("1d burn rate %v, want %v", x.BurnRate1d, c.burnRate1d)
			}
			if x.RecentWindow != "1d" || x.RecentBad != c.day.Bad || !x.Horizon.Equal(at.Add(window)) {
				t.Errorf("recent %s %v, horizon %v; want 1d %v, %v", x.RecentWindow, x.RecentBad, x.Horizon, c.day.Bad, at.Add(window))
			}
		})
	}
	x := exhaustionOf(at, window, budgetOf(Events{}, 0.02), Events{}, 0.02)
	if x.State != ExhaustionNoEvents || x.BurnRate1d != nil || x.At != nil {
		t.Errorf("no events: %+v", x)
	}
}

// TestBudgetSpentAt: an exhausted budget ran out at the first minute by
// which the window's bad events, counted minute by minute and scaled to
// the window's increase(), reached the budget.
func TestBudgetSpentAt(t *testing.T) {
	t0 := time.Date(2026, 10, 20, 0, 0, 0, 0, time.UTC)
	at := func(m int) *time.Time { return ptr(t0.Add(time.Duration(m) * time.Minute)) }
	for _, c := range []struct {
		name         string
		pic          string
		allowed, bad float64
		want         *time.Time
	}{
		// Bad minutes at steps 1, 3, 4: the second bad event, step 3
		// (ending 00:03), reaches a budget of 2.
		{"the second of three", "gbgbbg", 2, 3, at(3)},
		// increase() counted 6 where the minutes hold 3: a budget of 3 is
		// half the bad events, reached with 1.5 of the 3: step 3 again.
		{"scaled to increase()", "gbgbbg", 3, 6, at(3)},
		// Exactly spent: the last bad minute.
		{"exactly spent", "gbgbbg", 3, 3, at(4)},
		{"no bad minute to place it", "gggg", 1, 2, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := minutesOf(t0, c.pic).budgetSpentAt(c.allowed, c.bad, time.UTC)
			if (got == nil) != (c.want == nil) || (got != nil && !got.Equal(*c.want)) {
				t.Errorf("spent at %v, want %v", got, c.want)
			}
		})
	}
}

func TestFiringTierBothSidesOfEachCondition(t *testing.T) {
	pair := func(tier string, long, short float64, events float64, minEvents int) BurnRate {
		return BurnRate{Tier: tier, Factor: 14.4, LongRate: ptr(long), ShortRate: ptr(short), LongEvents: events, MinEvents: minEvents}
	}
	for _, c := range []struct {
		name  string
		pairs []BurnRate
		want  string
	}{
		{"both windows above", []BurnRate{pair("page", 14.5, 15, 10, 10)}, "page"},
		{"at the factor is not above", []BurnRate{pair("page", 14.4, 15, 10, 10)}, ""},
		{"short window below: the burning stopped", []BurnRate{pair("page", 20, 14, 10, 10)}, ""},
		{"too few events", []BurnRate{pair("page", 20, 20, 9, 10)}, ""},
		{"no guard", []BurnRate{pair("page", 20, 20, 1, 0)}, "page"},
		{"no events", []BurnRate{{Tier: "page", Factor: 14.4}}, ""},
		{"page wins over ticket", []BurnRate{pair("ticket", 20, 20, 10, 0), pair("page", 20, 20, 10, 0)}, "page"},
		{"ticket alone", []BurnRate{pair("ticket", 20, 20, 10, 0), pair("page", 1, 20, 10, 0)}, "ticket"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ""
			if tier := firing(c.pairs); tier != nil {
				got = *tier
			}
			if got != c.want {
				t.Errorf("firing tier %q, want %q", got, c.want)
			}
		})
	}
}

func TestMonthsSplitAtLocalMidnight(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 10, 11, 12, 0, 0, 0, time.UTC)
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	got := months(start, end, berlin)
	want := []struct {
		label      string
		start, end time.Time
	}{
		{"2026-10", start, time.Date(2026, 10, 31, 23, 0, 0, 0, time.UTC)},
		{"2026-11", time.Date(2026, 10, 31, 23, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)},
		{"2026-12", time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC), end},
	}
	if len(got) != len(want) {
		t.Fatalf("%d months %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		if got[i].label != w.label || !got[i].start.Equal(w.start) || !got[i].end.Equal(w.end) {
			t.Errorf("month %d: %s %v..%v, want %s %v..%v", i, got[i].label, got[i].start, got[i].end, w.label, w.start, w.end)
		}
	}
	if m := months(start, start.Add(time.Hour), time.UTC); len(m) != 1 || m[0].label != "2026-10" {
		t.Errorf("an hour inside October: %+v", m)
	}
}

// minutesOf builds minutes from a picture: '.' a minute with a sample and
// no event, 'g' one good event, 'b' one bad event, ' ' no sample.
func minutesOf(first time.Time, pic string) *minutes {
	m := &minutes{first: first}
	for _, c := range pic {
		m.present = append(m.present, c != ' ')
		bad, total := 0.0, 0.0
		switch c {
		case 'g':
			total = 1
		case 'b':
			bad, total = 1, 1
		}
		m.bad, m.total = append(m.bad, bad), append(m.total, total)
	}
	return m
}

func TestGapSteps(t *testing.T) {
	for _, c := range []struct {
		interval time.Duration
		want     int
	}{
		// At most 1m: two steps, one missing minute is a late scrape.
		{0, 2}, {15 * time.Second, 2}, {time.Minute, 2},
		// Else more than two intervals: ceil(2 x interval / 1m).
		{90 * time.Second, 3}, {3 * time.Minute, 6}, {150 * time.Second, 5}, {time.Hour, 120},
	} {
		if got := gapSteps(c.interval); got != c.want {
			t.Errorf("gapSteps(%v) = %d, want %d", c.interval, got, c.want)
		}
	}
}

func TestGaps(t *testing.T) {
	t0 := time.Date(2026, 10, 20, 0, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	for _, c := range []struct {
		name     string
		pic      string
		interval time.Duration
		want     []Period
	}{
		{"1m, none", "gg.gb", time.Minute, []Period{}},
		// One minute without a sample is a late scrape, not a gap.
		{"1m, a late scrape", "gg gb", time.Minute, []Period{}},
		// Steps 2 and 3 (ending 00:02, 00:03) have no sample: (00:01, 00:03].
		{"1m, two minutes", "gg  gb", time.Minute, []Period{{Start: at(1), End: at(3), Duration: "2m"}}},
		{"1m, two gaps", "  gg   ", time.Minute, []Period{{Start: at(-1), End: at(1), Duration: "2m"}, {Start: at(3), End: at(6), Duration: "3m"}}},
		// A 3m scrape interval leaves two minutes of three without a
		// sample: no gap (the old rule made each a row).
		{"3m, healthy", ".  .  .  .  .", 3 * time.Minute, []Period{}},
		// One missed scrape: 5 minutes without a sample, under 6.
		{"3m, one missed scrape", ".  .     .  .", 3 * time.Minute, []Period{}},
		// Two missed scrapes: steps 4 to 11 (8 minutes) in one row,
		// (00:03, 00:11].
		{"3m, two missed scrapes", ".  .        .  .", 3 * time.Minute, []Period{{Start: at(3), End: at(11), Duration: "8m"}}},
		// The same history judged at 1m: every 2-minute hole a row.
		{"3m history at 1m", ".  .  .", time.Minute, []Period{{Start: at(0), End: at(2), Duration: "2m"}, {Start: at(3), End: at(5), Duration: "2m"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := minutesOf(t0, c.pic).gaps(gapSteps(c.interval), time.UTC); !reflect.DeepEqual(got, c.want) {
				t.Errorf("%q at %v: gaps %+v, want %+v", c.pic, c.interval, got, c.want)
			}
		})
	}
	// A 2h gap in 30 days of a 3m scrape interval: one row. Samples at
	// every third minute; none at 10:00 ... 11:57 (40 scrapes); the last
	// before at 09:57, the next at 12:00: the steps 09:58 ... 11:59
	// without a sample, (09:57, 11:59], 2h2m.
	first := time.Date(2026, 10, 11, 12, 1, 0, 0, time.UTC) // the window's first step
	n := 30 * 24 * 60
	m := &minutes{first: first, present: make([]bool, n), bad: make([]float64, n), total: make([]float64, n)}
	gapFrom, gapTo := time.Date(2026, 10, 20, 10, 0, 0, 0, time.UTC), time.Date(2026, 10, 20, 12, 0, 0, 0, time.UTC)
	for i := range n {
		e := m.end(i)
		m.present[i] = e.Minute()%3 == 0 && (e.Before(gapFrom) || !e.Before(gapTo))
	}
	got := m.gaps(gapSteps(3*time.Minute), time.UTC)
	want := []Period{{Start: time.Date(2026, 10, 20, 9, 57, 0, 0, time.UTC), End: time.Date(2026, 10, 20, 11, 59, 0, 0, time.UTC), Duration: "2h2m"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("30 days at 3m with a 2h gap: %+v, want %+v", got, want)
	}
	if got := m.gaps(gapSteps(time.Minute), time.UTC); len(got) != 14400-41+1 {
		// 14,400 holes of 2 minutes, of which the 41 between 09:57 and
		// 12:00 are one.
		t.Errorf("the same judged at 1m: %d gaps, want 14,360", len(got))
	}
}

// TestBoundGaps: the longest gaps are kept, in time order, and the rest
// counted.
func TestBoundGaps(t *testing.T) {
	t0 := time.Date(2026, 10, 20, 0, 0, 0, 0, time.UTC)
	g := func(start, minutes int) Period {
		return Period{Start: t0.Add(time.Duration(start) * time.Hour), End: t0.Add(time.Duration(start)*time.Hour + time.Duration(minutes)*time.Minute)}
	}
	all := []Period{g(0, 2), g(1, 5), g(2, 3), g(3, 5), g(4, 1)}
	kept, omitted := boundGaps(all, 3)
	if want := []Period{g(1, 5), g(2, 3), g(3, 5)}; !reflect.DeepEqual(kept, want) || omitted != 2 {
		t.Errorf("kept %+v, %d omitted; want %+v, 2", kept, omitted, want)
	}
	if kept, omitted := boundGaps(all[:2], 3); len(kept) != 2 || omitted != 0 {
		t.Errorf("under the bound: kept %d, %d omitted", len(kept), omitted)
	}
}

// TestSampleSpacing: the median distance between minutes with a sample,
// the scrape interval when neither the flag nor the targets API gives it.
func TestSampleSpacing(t *testing.T) {
	t0 := time.Date(2026, 10, 20, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		pic  string
		want time.Duration
	}{
		{"....", time.Minute},
		{".  .  .  .", 3 * time.Minute},
		// A gap does not move the median: 3, 3, 3, 12, 3.
		{".  .  .  .           .  .", 3 * time.Minute},
		{". . .   .", 2 * time.Minute},
		{".", 0},
		{"   ", 0},
	} {
		if got := minutesOf(t0, c.pic).sampleSpacing(); got != c.want {
			t.Errorf("%q: spacing %v, want %v", c.pic, got, c.want)
		}
	}
}

func TestZeroTraffic(t *testing.T) {
	t0 := time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC)
	quiet := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = '.'
		}
		return string(b)
	}
	day := int(MinZeroTraffic / time.Minute)
	if got := minutesOf(t0, "g"+quiet(day-1)+"g").zeroTraffic(2, time.UTC); len(got) != 0 {
		t.Errorf("one minute short of %v: %+v, want none", MinZeroTraffic, got)
	}
	got := minutesOf(t0, "g"+quiet(day)+"g").zeroTraffic(2, time.UTC)
	want := []Period{{Start: t0, End: t0.Add(MinZeroTraffic), Duration: "12h"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("exactly %v: %+v, want %+v", MinZeroTraffic, got, want)
	}
	// A gap inside a quiet run is a gap, not zero traffic.
	if got := minutesOf(t0, quiet(day/2)+"  "+quiet(day/2)).zeroTraffic(2, time.UTC); len(got) != 0 {
		t.Errorf("quiet, gap, quiet: %+v, want none", got)
	}
	// At a 3m scrape interval the minutes between samples are not gaps:
	// a quiet 12h is zero traffic all the same.
	if got := minutesOf(t0, "g"+strings.Repeat("  .", day/3)+"g").zeroTraffic(gapSteps(3*time.Minute), time.UTC); !reflect.DeepEqual(got, want) {
		t.Errorf("12h quiet at 3m: %+v, want %+v", got, want)
	}
}

func TestChart(t *testing.T) {
	t0 := time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC)
	// 7 minutes in steps of 3: a first point of 1 minute, then 3 and 3.
	m := minutesOf(t0, "bggbg..")
	got := m.chart(3, 0.5, time.UTC)
	if len(got) != 3 {
		t.Fatalf("%d points, want 3", len(got))
	}
	for i, w := range []struct {
		t      time.Time
		sli    any
		budget any
	}{
		// 1 bad of 1: SLI 0; budget 0.5 x 1 event, 1 spent: 1 - 1/0.5 = -1.
		{t0, 0.0, -1.0},
		// g g b: SLI 2/3; cumulative 2 bad of 4: 1 - 2/2 = 0.
		{t0.Add(3 * time.Minute), 2.0 / 3, 0.0},
		// g . .: SLI 1; cumulative 2 of 5: 1 - 2/2.5.
		{t0.Add(6 * time.Minute), 1.0, 0.2},
	} {
		p := got[i]
		if !p.T.Equal(w.t) || !near(p.SLI, w.sli) || !near(p.BudgetRemaining, w.budget) {
			t.Errorf("point %d: %v %v %v, want %v %v %v", i, p.T, deref(p.SLI), deref(p.BudgetRemaining), w.t, w.sli, w.budget)
		}
	}
	// Steps without events have no SLI, never 100%.
	if p := minutesOf(t0, "...").chart(3, 0.01, time.UTC); len(p) != 1 || p[0].SLI != nil || p[0].BudgetRemaining != nil {
		t.Errorf("quiet chart %+v, want one point without SLI or budget", p)
	}
	for _, c := range []struct {
		window time.Duration
		want   int
	}{{time.Hour, 1}, {1000 * time.Minute, 1}, {1001 * time.Minute, 2}, {30 * slo.Day, 44}, {7 * slo.Day, 11}} {
		if got := chartStep(c.window); got != c.want {
			t.Errorf("chartStep(%v) = %d minutes, want %d", c.window, got, c.want)
		}
	}
}

func TestIncreases(t *testing.T) {
	got := increases([]float64{10, 12, 0, 12, 11, 15}, []bool{true, true, false, true, true, true})
	// No sample: no event; a drop (reset or a series gone stale): no event.
	want := []float64{0, 2, 0, 0, 0, 4}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("increases %v, want %v", got, want)
	}
}

func TestTop(t *testing.T) {
	got := top(map[string]float64{"a": 1, "b": 5, "c": 5, "d": 0, "e": 2, "f": 3, "g": 4}, 20)
	var names []string
	for _, c := range got {
		names = append(names, c.Value)
	}
	if want := []string{"b", "c", "g", "f", "e"}; !reflect.DeepEqual(names, want) {
		t.Errorf("top %v, want %v", names, want)
	}
	if got[0].Share != 0.25 {
		t.Errorf("share %v, want 0.25", got[0].Share)
	}
}

func TestSelectorsOfRatioQueries(t *testing.T) {
	got, err := selectorsOf(`sum(rate(a_total{job="x"}[1m])) + sum(rate(b_total[1m])) / sum(rate(a_total{job="x"}[1m]))`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`a_total{job="x"}`, `b_total`}; !reflect.DeepEqual(got, want) {
		t.Errorf("selectors %q, want %q", got, want)
	}
}
