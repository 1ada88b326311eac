package report

import (
	"math"
	"reflect"
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

// TestExhaustion: a 30-day window of 10,000 events and a budget of 2%
// (200 events); the date is at + remainingRatio x window / burnRate1d.
func TestExhaustion(t *testing.T) {
	at := time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)
	window := 30 * slo.Day
	win := func(bad float64) Events { return Events{Good: 10000 - bad, Bad: bad, Total: 10000} }
	day := func(bad float64) Events { return Events{Good: 1000 - bad, Bad: bad, Total: 1000} }
	for _, c := range []struct {
		name       string
		window     Events
		day        Events
		state      string
		after      time.Duration
		burnRate1d *float64
	}{
		// Half the budget left (100 of 200), the last day at 2x (40 bad
		// of 1000 = 4% over 2%): 0.5 x 30d / 2 = 7.5d.
		{"2x, half left", win(100), day(40), ExhaustionProjected, 7*slo.Day + 12*time.Hour, ptr(2.0)},
		// 150 of 200 left at 0.5x: 0.75 x 30d / 0.5 = 45d, beyond the
		// window: still a date.
		{"0.5x, three quarters left", win(50), day(10), ExhaustionProjected, 45 * slo.Day, ptr(0.5)},
		// 1x with the whole budget: one window.
		{"1x, clean window", win(0), day(20), ExhaustionProjected, window, ptr(1.0)},
		{"a clean last day", win(100), day(0), ExhaustionNever, 0, ptr(0.0)},
		{"no events in the last day", win(100), Events{}, ExhaustionNever, 0, nil},
		// 1e-12 x: 0.5 x 30d x 1e12 is far beyond a century.
		{"a vanishing burn rate", win(100), Events{Bad: 2e-11, Good: 1000, Total: 1000}, ExhaustionNever, 0, ptr(1e-12)},
		{"overspent", win(300), day(0), ExhaustionExhausted, 0, ptr(0.0)},
		{"exactly spent", win(200), day(40), ExhaustionExhausted, 0, ptr(2.0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := exhaustionOf(at, window, budgetOf(c.window, 0.02), c.day, 0.02)
			if x.State != c.state {
				t.Fatalf("state %q, want %q", x.State, c.state)
			}
			if want := at.Add(c.after); (x.At == nil) != (c.after == 0) || (x.At != nil && !x.At.Equal(want)) {
				t.Errorf("at %v, want %v", x.At, want)
			}
			if (x.BurnRate1d == nil) != (c.burnRate1d == nil) || (x.BurnRate1d != nil && math.Abs(*x.BurnRate1d-*c.burnRate1d) > 1e-9) {
				t.Errorf("1d burn rate %v, want %v", x.BurnRate1d, c.burnRate1d)
			}
		})
	}
	x := exhaustionOf(at, window, budgetOf(Events{}, 0.02), Events{}, 0.02)
	if x.State != ExhaustionNoEvents || x.BurnRate1d != nil {
		t.Errorf("no events: %+v", x)
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

func TestGaps(t *testing.T) {
	t0 := time.Date(2026, 10, 20, 0, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	for _, c := range []struct {
		pic  string
		want []Period
	}{
		{"gg.gb", []Period{}},
		// One minute without a sample is a late scrape, not a gap.
		{"gg gb", []Period{}},
		// Steps 2 and 3 (ending 00:02, 00:03) have no sample: (00:01, 00:03].
		{"gg  gb", []Period{{Start: at(1), End: at(3), Duration: "2m"}}},
		{"  gg   ", []Period{{Start: at(-1), End: at(1), Duration: "2m"}, {Start: at(3), End: at(6), Duration: "3m"}}},
	} {
		if got := minutesOf(t0, c.pic).gaps(time.UTC); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: gaps %+v, want %+v", c.pic, got, c.want)
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
	if got := minutesOf(t0, "g"+quiet(day-1)+"g").zeroTraffic(time.UTC); len(got) != 0 {
		t.Errorf("one minute short of %v: %+v, want none", MinZeroTraffic, got)
	}
	got := minutesOf(t0, "g"+quiet(day)+"g").zeroTraffic(time.UTC)
	want := []Period{{Start: t0, End: t0.Add(MinZeroTraffic), Duration: "12h"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("exactly %v: %+v, want %+v", MinZeroTraffic, got, want)
	}
	// A gap inside a quiet run is a gap, not zero traffic.
	if got := minutesOf(t0, quiet(day/2)+"  "+quiet(day/2)).zeroTraffic(time.UTC); len(got) != 0 {
		t.Errorf("quiet, gap, quiet: %+v, want none", got)
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
