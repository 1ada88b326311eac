package report

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ (go test ./slo/report -run TestGolden -update)")

// fixture is a report with a fixed clock: every kind of row, a gap, a
// quiet day, an API warning, a firing page, and an SLO without data.
func fixture() *Report {
	at := time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)
	start := at.Add(-7 * 24 * time.Hour)
	var points []Point
	for i := 1; i <= 168; i++ {
		p := Point{T: start.Add(time.Duration(i) * time.Hour)}
		switch {
		case i >= 30 && i < 33: // the gap
		case i >= 72 && i < 96: // the quiet day: no SLI, budget unchanged
			p.BudgetRemaining = ptr(0.6)
		default:
			p.SLI = ptr(0.995 + 0.004*math.Sin(float64(i)/10))
			p.BudgetRemaining = ptr(1 - float64(i)/168*0.8)
		}
		points = append(points, p)
	}
	page := "page"
	return &Report{
		At: at, Source: "http://prometheus.example:9090", Timezone: "UTC",
		Warnings:     []string{"shop-rollouts: partial response: store 10.0.0.7:10901 unavailable"},
		Partial:      true,
		FileWarnings: []string{`slos.yaml:20: slo "daily": ticket: no window pair is left for a 1d period (every default pair would spend more than 100% of the budget), so this tier would never alert: set ticket.enabled: false, explicit windows, or a longer period; a report needs no alert rules and goes on without the ticket tier's burn rates`},
		SLOs: []SLO{
			{
				ID: "shop-rollouts", Service: "shop", Name: "rollouts", Description: "Deployment rollouts are available within 2 minutes.",
				SLI: "latency kube_convergence_rollout_duration_seconds <= 120.0", Objective: 0.99,
				Window: "7d", Start: start, End: at, Status: StatusBreached,
				Attainment: ptr(0.98765),
				Events:     Events{Good: 8000.25, Bad: 100.75, Total: 8101},
				Budget:     Budget{Total: 81.01, Consumed: 100.75, Remaining: -19.74, RemainingRatio: ptr(-19.74 / 81.01)},
				// 100.75 bad of a budget of 81.01, spent since the 5th day.
				Exhaustion: Exhaustion{BurnRate1d: ptr(2.5), State: ExhaustionExhausted, Since: ptr(start.Add(4*24*time.Hour + 7*time.Hour + 13*time.Minute)), RecentWindow: "1d", RecentBad: 31.5, Horizon: at.Add(7 * 24 * time.Hour)},
				BurnRates: []BurnRate{
					{Tier: "page", Long: "1h", Short: "5m", Factor: 14.4, LongRate: ptr(15.2), ShortRate: ptr(20.0), LongEvents: 120, MinEvents: 10, Firing: true},
					{Tier: "page", Long: "6h", Short: "30m", Factor: 6, LongRate: ptr(4.1), ShortRate: ptr(16.0), LongEvents: 700, MinEvents: 10},
					{Tier: "ticket", Long: "1d", Short: "2h", Factor: 3, LongRate: ptr(2.5), ShortRate: ptr(9.0)},
				},
				FiringTier: &page,
				Worst: Worst{
					Namespaces: []Contributor{{Value: "shop", Bad: 80.5, Share: 0.799}, {Value: "shop-canary", Bad: 20.25, Share: 0.201}},
					Kinds:      []Contributor{{Value: "Deployment", Bad: 100.75, Share: 1}},
					Stages:     []Contributor{},
				},
				Months: []Month{
					{Month: "2026-11", Start: start, End: at, Events: Events{Good: 8000.25, Bad: 100.75, Total: 8101}, Attainment: ptr(0.98765), Status: StatusBreached},
				},
				Gaps:           []Period{{Start: start.Add(29 * time.Hour), End: start.Add(32 * time.Hour), Duration: "3h"}},
				GapsOmitted:    3,
				ScrapeInterval: ScrapeInterval{Interval: "1m", Source: IntervalTargets, MinGap: "2m"},
				ZeroTraffic:    []Period{{Start: start.Add(71 * time.Hour), End: start.Add(95 * time.Hour), Duration: "1d"}},
				Chart:          Chart{Step: "1h", Points: points},
				Warnings:       []string{"partial response: store 10.0.0.7:10901 unavailable"},
				Partial:        true,
			},
			{
				ID: "shop-pods", Service: "shop", Name: "pods", SLI: "latency kube_convergence_pod_startup_seconds <= 5.0", Objective: 0.999,
				Window: "7d", Start: start, End: at, Status: StatusNoData,
				Exhaustion:     Exhaustion{State: ExhaustionNoEvents, RecentWindow: "1d", Horizon: at.Add(7 * 24 * time.Hour)},
				BurnRates:      []BurnRate{{Tier: "ticket", Long: "1d", Short: "2h", Factor: 3}},
				Worst:          Worst{Namespaces: []Contributor{}, Kinds: []Contributor{}, Stages: []Contributor{}},
				Months:         []Month{{Month: "2026-11", Start: start, End: at, Status: StatusNoData}},
				Gaps:           []Period{{Start: start, End: at, Duration: "7d"}},
				ScrapeInterval: ScrapeInterval{Interval: "1m", Source: IntervalDefault, MinGap: "2m"},
				ZeroTraffic:    []Period{},
				Chart:          Chart{Step: "1h", Points: []Point{{T: at}}},
				Warnings:       []string{},
			},
			{
				// Met, 6 events of budget left, 4 bad in the last day:
				// 6 / 4 per day = 1.5d = 1d 12h after at.
				ID: "shop-workloads", Service: "shop", Name: "workloads", SLI: "latency kube_convergence_workload_convergence_seconds <= 60.0", Objective: 0.99,
				Window: "7d", Start: start, End: at, Status: StatusMet,
				Attainment:     ptr(0.996),
				Events:         Events{Good: 996, Bad: 4, Total: 1000},
				Budget:         Budget{Total: 10, Consumed: 4, Remaining: 6, RemainingRatio: ptr(0.6)},
				Exhaustion:     Exhaustion{BurnRate1d: ptr(2.0), At: ptr(at.Add(36 * time.Hour)), State: ExhaustionProjected, RecentWindow: "1d", RecentBad: 4, Horizon: at.Add(7 * 24 * time.Hour)},
				BurnRates:      []BurnRate{{Tier: "ticket", Long: "1d", Short: "2h", Factor: 3, LongRate: ptr(2.0), ShortRate: ptr(1.0), LongEvents: 150}},
				Worst:          Worst{Namespaces: []Contributor{{Value: "shop", Bad: 4, Share: 1}}, Kinds: []Contributor{}, Stages: []Contributor{}},
				Months:         []Month{{Month: "2026-11", Start: start, End: at, Events: Events{Good: 996, Bad: 4, Total: 1000}, Attainment: ptr(0.996), Status: StatusMet}},
				Gaps:           []Period{},
				ScrapeInterval: ScrapeInterval{Interval: "3m", Source: IntervalFlag, MinGap: "6m"},
				ZeroTraffic:    []Period{},
				Chart:          Chart{Step: "1h", Points: []Point{{T: at}}},
				Warnings:       []string{},
			},
		},
	}
}

// TestGolden renders the fixture in every format and compares it with
// testdata/report.<ext>; -update rewrites them.
func TestGolden(t *testing.T) {
	for _, c := range []struct{ format, ext string }{
		{FormatText, "txt"}, {FormatMarkdown, "md"}, {FormatJSON, "json"}, {FormatHTML, "html"},
	} {
		t.Run(c.format, func(t *testing.T) {
			var b bytes.Buffer
			if err := Render(&b, fixture(), c.format); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "report."+c.ext)
			if *update {
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./slo/report -run TestGolden -update)", err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("%s differs from %s (go test ./slo/report -run TestGolden -update, then review the diff):\n%s", c.format, path, firstDiff(b.String(), string(want)))
			}
		})
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return "line " + itoa(i+1) + ":\n got: " + g[i] + "\nwant: " + w[i]
		}
	}
	return "lengths differ: " + itoa(len(g)) + " lines, want " + itoa(len(w))
}

func itoa(i int) string { return fmtCount(float64(i)) }

// TestGoldenJSONValidates checks the JSON golden against the committed
// docs/report.schema.json.
func TestGoldenJSONValidates(t *testing.T) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	sch, err := c.Compile("../../docs/report.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join("testdata", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("testdata/report.json does not validate against docs/report.schema.json: %v", err)
	}
	// And the schema is not vacuous: a report without at is refused.
	bad, err := jsonschema.UnmarshalJSON(strings.NewReader(`{"source": "", "timezone": "UTC", "slos": [], "warnings": []}`))
	if err != nil {
		t.Fatal(err)
	}
	if sch.Validate(bad) == nil {
		t.Error("a report without at validates")
	}
}

// TestHTMLIsSelfContained: no script, no external reference; one path
// point per chart point with a value.
func TestHTMLIsSelfContained(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, fixture(), FormatHTML); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, bad := range []string{"<script", "<link", "<img", "@import", "url(", "src=", "href="} {
		if strings.Contains(html, bad) {
			t.Errorf("the HTML contains %q", bad)
		}
	}
	// 168 points: 3 in the gap have neither value, 24 in the quiet day no SLI.
	for _, want := range []string{`data-points="141"`, `data-points="165"`, `data-points="0"`} {
		if !strings.Contains(html, want) {
			t.Errorf("the HTML has no chart with %s", want)
		}
	}
}

// Text from the SLO file or the API stays literal and on one table row.
func TestMarkdownEscape(t *testing.T) {
	for in, want := range map[string]string{
		"a|b":             `a\|b`,
		`C:\new`:          `C:\\new`,
		"[x](http://e)":   `\[x\](http://e)`,
		"`code`":          "\\`code\\`",
		"*b* _i_":         `\*b\* \_i\_`,
		"<img src=x>":     "&lt;img src=x&gt;",
		"one\ntwo\r\nx\r": "one<br>two<br>x<br>",
	} {
		if got := mdEscape(in); got != want {
			t.Errorf("mdEscape(%q) = %q, want %q", in, got, want)
		}
	}
}
