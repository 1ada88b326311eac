package dashboards

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"

	"github.com/kube-convergence/kube-convergence-exporter/internal/latency"
)

// goldenUIDs are the dashboards' uids. Grafana URLs, bookmarks, links
// between dashboards and links from alerts embed them: changing one breaks
// those, so it must be a decision, made here.
var goldenUIDs = []string{"kce-overview", "kce-rollouts", "kce-pods-endpoints", "kce-watch", "kce-exporter", "kce-controllers", "kce-webhooks"}

func TestUIDsUniqueAndStable(t *testing.T) {
	var uids []string
	for _, d := range All() {
		uids = append(uids, d.UID)
		if n := len(d.UID); n < 8 || n > 40 {
			t.Errorf("uid %q: Grafana wants 8 to 40 characters", d.UID)
		}
	}
	if !slices.Equal(uids, goldenUIDs) {
		t.Errorf("uids %v, want %v (changing a uid breaks every link and bookmark to the dashboard)", uids, goldenUIDs)
	}
	seen := map[string]bool{}
	for _, u := range uids {
		if seen[u] {
			t.Errorf("uid %q used twice", u)
		}
		seen[u] = true
	}
	// The committed JSON carries the same uid, and no stray dashboard is
	// left behind when one is renamed.
	files, err := filepath.Glob("*.json")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, d := range All() {
		want = append(want, d.File())
		if got := rendered(t, d)["uid"]; got != d.UID {
			t.Errorf("%s: uid %v, want %s", d.File(), got, d.UID)
		}
	}
	slices.Sort(want)
	if !slices.Equal(files, want) {
		t.Errorf("dashboards/*.json = %v, want exactly %v (remove files of dashboards that no longer exist)", files, want)
	}
}

// rendered is a dashboard's JSON as a generic tree.
func rendered(t *testing.T, d Dashboard) map[string]any {
	t.Helper()
	b, err := d.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func parsed(t *testing.T, d Dashboard) *Parsed {
	t.Helper()
	b, err := d.JSON()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type rect struct {
	title      string
	x, y, w, h int
}

func (r rect) overlaps(o rect) bool {
	return r.x < o.x+o.w && o.x < r.x+r.w && r.y < o.y+o.h && o.y < r.y+r.h
}

// Every panel lies inside the 24-column grid and no two overlap (the SDK's
// automatic layout can overflow; ours is explicit, and this checks it).
func TestLayout(t *testing.T) {
	for _, d := range All() {
		var rects []rect
		ids := map[float64]bool{}
		for _, p := range rendered(t, d)["panels"].([]any) {
			p := p.(map[string]any)
			title, _ := p["title"].(string)
			gp, ok := p["gridPos"].(map[string]any)
			if !ok {
				t.Errorf("%s / %q: no gridPos", d.UID, title)
				continue
			}
			r := rect{title: title, x: int(gp["x"].(float64)), y: int(gp["y"].(float64)), w: int(gp["w"].(float64)), h: int(gp["h"].(float64))}
			if r.x < 0 || r.y < 0 || r.w < 1 || r.h < 1 || r.x+r.w > gridWidth {
				t.Errorf("%s / %q: gridPos %+v outside the %d-column grid", d.UID, title, r, gridWidth)
			}
			if p["type"] == "row" && (r.x != 0 || r.w != gridWidth || r.h != 1) {
				t.Errorf("%s / row %q: gridPos %+v, want full width, height 1", d.UID, title, r)
			}
			id, _ := p["id"].(float64)
			if id == 0 || ids[id] {
				t.Errorf("%s / %q: id %v missing or used twice", d.UID, title, p["id"])
			}
			ids[id] = true
			for _, o := range rects {
				if r.overlaps(o) {
					t.Errorf("%s: %q %+v overlaps %q %+v", d.UID, title, r, o.title, o)
				}
			}
			rects = append(rects, r)
		}
		if len(rects) < 4 {
			t.Errorf("%s: %d panels", d.UID, len(rects))
		}
	}
}

// The line helper refuses a line wider than the grid instead of letting it
// overflow.
func TestLineRefusesOverflow(t *testing.T) {
	brd := newBoard("")
	brd.line(4, span(18, statPanel("a", "", "")), span(12, statPanel("b", "", "")))
	if _, err := brd.dashboard(Dashboard{UID: "test-overflow", Title: "t"}); err == nil || !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("a 30-column line: error %v, want one naming panel b", err)
	}
}

// Dashboard-level settings that a provisioned, generated dashboard needs.
func TestDashboardSettings(t *testing.T) {
	for _, d := range All() {
		m := rendered(t, d)
		if m["editable"] != false {
			t.Errorf("%s: editable %v, want false: the JSON is generated, edits in Grafana are lost", d.UID, m["editable"])
		}
		if m["schemaVersion"] != float64(42) {
			t.Errorf("%s: schemaVersion %v, want 42 (grafana-foundation-sdk v0.0.22)", d.UID, m["schemaVersion"])
		}
		if m["title"] != d.Title || m["description"] == "" {
			t.Errorf("%s: title %v, description %q", d.UID, m["title"], m["description"])
		}
		if tags, _ := m["tags"].([]any); !slices.Contains(tags, any(Tag)) {
			t.Errorf("%s: tags %v, want %q (the dashboards link to each other through it)", d.UID, tags, Tag)
		}
		var vars []string
		for _, v := range parsed(t, d).Variables {
			vars = append(vars, v.Name)
		}
		for _, want := range []string{"datasource", "cluster", exporterURLVar} {
			if !slices.Contains(vars, want) {
				t.Errorf("%s: variables %v, want %s", d.UID, vars, want)
			}
		}
		links, _ := json.Marshal(m["links"])
		if !bytes.Contains(links, []byte(`"url":"${`+exporterURLVar+`}"`)) {
			t.Errorf("%s: links %s, want one to ${%s}", d.UID, links, exporterURLVar)
		}
	}
}

// saysWhenEmpty: a description says when the panel is empty, has gaps, or
// that it never is.
var saysWhenEmpty = regexp.MustCompile(`(?i)\bempty\b|\bgaps\b`)

// Every panel says what its number means (and when it is empty), has a
// unit where it draws numbers, and queries the datasource variable.
func TestPanelsDescribedWithUnits(t *testing.T) {
	for _, d := range All() {
		for _, p := range rendered(t, d)["panels"].([]any) {
			p := p.(map[string]any)
			if p["type"] == "row" {
				continue
			}
			title := p["title"]
			desc, _ := p["description"].(string)
			if len(desc) < 60 || !saysWhenEmpty.MatchString(desc) {
				t.Errorf("%s / %q: description %q: say what the number means and when the panel is empty (or never)", d.UID, title, desc)
			}
			ds, _ := json.Marshal(p["datasource"])
			if string(ds) != `{"type":"prometheus","uid":"${datasource}"}` {
				t.Errorf("%s / %q: datasource %s", d.UID, title, ds)
			}
			if p["type"] == "table" || p["type"] == "heatmap" {
				continue // per-column units; the heatmap's y axis
			}
			fc, _ := p["fieldConfig"].(map[string]any)
			defaults, _ := fc["defaults"].(map[string]any)
			if unit, _ := defaults["unit"].(string); unit == "" {
				t.Errorf("%s / %q: no unit", d.UID, title)
			}
		}
	}
}

// exemplarHistograms are the histograms the collectors observe with
// exemplars (latency.Observe with latency.Exemplar): a latency panel
// reading them links single objects.
var exemplarHistograms = []string{
	"kube_convergence_rollout_duration_seconds",
	"kube_convergence_pod_startup_seconds",
	"kube_convergence_pod_stage_interval_seconds",
	"kube_convergence_endpoint_propagation_seconds",
	"kube_convergence_endpoint_removal_seconds",
}

func TestExemplarsOnLatencyPanels(t *testing.T) {
	n := 0
	for _, d := range All() {
		for _, tg := range parsed(t, d).Targets {
			for _, h := range exemplarHistograms {
				// Distributions over time: quantiles and heatmaps.
				distribution := strings.Contains(tg.Expr, "histogram_quantile") || strings.Contains(tg.Expr, "by (le)")
				if strings.Contains(tg.Expr, h+"_bucket") && distribution && !tg.Instant {
					n++
					if !tg.Exemplar {
						t.Errorf("%s: reads %s_bucket over time without exemplars", tg, h)
					}
				}
			}
		}
	}
	if n < len(exemplarHistograms) {
		t.Errorf("%d latency targets, want at least one per exemplar histogram", n)
	}
}

// exposed is the metrics a dashboard may read, with their label names.
type exposed map[string][]string

// targetLabels are on every scraped series: job and instance from
// Prometheus, cluster from multi-cluster setups (external or target
// label; cluster=~".*" also matches series without it).
var targetLabels = []string{"job", "instance", "cluster"}

// standardMetrics are series the dashboards read beyond the README's
// table: per-target series that Prometheus records itself, and the
// client_golang process and Go collectors, which the README says the
// exporter exposes unless --web.disable-exporter-metrics. All without
// labels of their own.
var standardMetrics = []string{
	"up", "scrape_duration_seconds", "scrape_samples_scraped",
	"process_resident_memory_bytes", "process_cpu_seconds_total", "go_memstats_heap_inuse_bytes", "go_goroutines",
}

// referenceRow is a row of the README's metric reference:
// | `name` | type | `label`, `label` | meaning |
var referenceRow = regexp.MustCompile("^\\| `([a-z_:]+)` \\| (\\w+) \\| ([^|]*) \\|")

// exposedMetrics reads the generated metric reference of the README (the
// metrics the exporter registers; internal/gen keeps it in sync), the
// record names of the bundled rules, and standardMetrics.
func exposedMetrics(t *testing.T) exposed {
	t.Helper()
	out := exposed{}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "<!-- BEGIN METRIC REFERENCE")
	table, _, ok2 := strings.Cut(table, "<!-- END METRIC REFERENCE")
	if !ok || !ok2 {
		t.Fatal("README.md: no METRIC REFERENCE markers")
	}
	for _, line := range strings.Split(table, "\n") {
		m := referenceRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ls := slices.Clone(targetLabels)
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" && l != "—" {
				ls = append(ls, l)
			}
		}
		out[m[1]] = ls
		if m[2] == "histogram" {
			out[m[1]+"_bucket"] = append(slices.Clone(ls), "le")
			out[m[1]+"_sum"] = ls
			out[m[1]+"_count"] = ls
		}
	}
	if len(out) < 20 {
		t.Fatalf("README.md metric reference: read only %d metrics", len(out))
	}
	for _, m := range standardMetrics {
		out[m] = targetLabels
	}
	for name, ls := range recordedMetrics(t) {
		out[name] = append(slices.Clone(targetLabels), ls...)
	}
	return out
}

// recordedMetrics returns the record names of rules/*.rules.yml with the
// labels their rules set (the SLO records aggregate everything else away).
func recordedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "rules", "*.rules.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("rules/*.rules.yml: %v %v", files, err)
	}
	out := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rf struct {
			Groups []struct {
				Rules []struct {
					Record string            `yaml:"record"`
					Labels map[string]string `yaml:"labels"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(b, &rf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Record == "" {
					continue
				}
				for l := range r.Labels {
					if !slices.Contains(out[r.Record], l) {
						out[r.Record] = append(out[r.Record], l)
					}
				}
				if out[r.Record] == nil {
					out[r.Record] = []string{}
				}
			}
		}
	}
	return out
}

// testIntervals are the built-in intervals the unit tests substitute.
var testIntervals = Intervals{RateInterval: 5 * time.Minute, Interval: 30 * time.Second, Range: time.Hour}

// checkQuery parses expr with the Prometheus PromQL parser and checks that
// every selector names a metric in known and only matches labels it has.
func checkQuery(t *testing.T, what fmt.Stringer, expr string, known exposed) {
	t.Helper()
	ast, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", what, expr, err)
		return
	}
	selectors := 0
	parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		selectors++
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		ls, ok := known[name]
		if !ok {
			t.Errorf("%s: reads %q, which the exporter does not expose (README metric reference) and the bundled rules do not record", what, name)
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != model.MetricNameLabel && !slices.Contains(ls, m.Name) {
				t.Errorf("%s: matches label %q of %s, which has only %v", what, m.Name, name, ls)
			}
			// Prometheus 3 stores le="5.0", not le="5" (Prometheus 3 migration guide,
			// "le and quantile label values"), and the
			// exporter writes threshold the same way: anything else
			// matches nothing on a real server.
			if (m.Name == "le" || m.Name == "threshold") && m.Type == labels.MatchEqual {
				if f, err := strconv.ParseFloat(m.Value, 64); err != nil || latency.Threshold(f) != m.Value {
					t.Errorf("%s: %s=%q is not the form Prometheus 3 stores (%s)", what, m.Name, m.Value, latency.Threshold(f))
				}
			}
		}
		return nil
	})
	if selectors == 0 {
		t.Errorf("%s: %q reads no metric", what, expr)
	}
}

// Every target parses after Grafana's variable substitution and reads
// only what the exporter exposes or the bundled rules record, with labels
// those series have.
func TestQueriesParseAndReadExposedMetrics(t *testing.T) {
	known := exposedMetrics(t)
	n := 0
	for _, d := range All() {
		p := parsed(t, d)
		for _, tg := range p.Targets {
			n++
			expr, err := Expand(tg.Expr, p.Variables, testIntervals)
			if err != nil {
				t.Errorf("%s: %v", tg, err)
				continue
			}
			checkQuery(t, tg, expr, known)
		}
	}
	if n < 40 {
		t.Errorf("only %d targets", n)
	}
}

type variableName struct{ d, v string }

func (v variableName) String() string { return v.d + " / variable " + v.v }

// Variable queries read exposed metrics, and the label they list exists on
// the metric.
func TestVariableQueries(t *testing.T) {
	known := exposedMetrics(t)
	for _, d := range All() {
		p := parsed(t, d)
		for _, v := range p.Variables {
			if v.Type != "query" {
				continue
			}
			sel, label, ok := LabelValuesQuery(v.Query)
			if !ok {
				t.Errorf("%s / %s: query %q is not label_values(selector, label)", d.UID, v.Name, v.Query)
				continue
			}
			expr, err := Expand(sel, p.Variables, testIntervals)
			if err != nil {
				t.Errorf("%s / %s: %v", d.UID, v.Name, err)
				continue
			}
			what := variableName{d.UID, v.Name}
			checkQuery(t, what, expr, known)
			if ast, err := parser.NewParser(parser.Options{}).ParseExpr(expr); err == nil {
				if vs, ok := ast.(*parser.VectorSelector); ok && !slices.Contains(known[vs.Name], label) {
					t.Errorf("%s: lists label %q, which %s does not have", what, label, vs.Name)
				}
			}
		}
	}
}

func TestExpand(t *testing.T) {
	vars := []Variable{{Name: "namespace"}, {Name: "kind"}}
	got, err := Expand(`rate(m{namespace=~"$namespace", kind=~"${kind}", k=~"[[kind]]", n=~"${namespace:regex}"}[$__rate_interval]) + increase(m[$__range])`, vars,
		Intervals{RateInterval: time.Minute, Range: 3 * time.Minute})
	want := `rate(m{namespace=~".*", kind=~".*", k=~".*", n=~".*"}[1m]) + increase(m[3m])`
	if err != nil || got != want {
		t.Errorf("Expand = %q, %v; want %q", got, err, want)
	}
	if _, err := Expand(`m{namespace=~"$namepsace"}`, vars, Intervals{}); err == nil {
		t.Error("a misspelt variable expanded without error")
	}
}

// The panels' thresholds are the bundled SLOs' and alerts': every latency
// SLO threshold is a line on a panel of its histogram, and the burn-rate
// colours start at the alerts' factors.
func TestThresholdsMatchBundledSLOs(t *testing.T) {
	b, err := loadBundled()
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, d := range All() {
		j, err := d.JSON()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, j...)
	}
	n := 0
	for _, s := range b.slos {
		l := s.SLI.Latency
		if l == nil {
			continue
		}
		n++
		if !panelHasLine(t, l.Metric+"_bucket", l.Threshold) {
			t.Errorf("SLO %s: no panel reading %s_bucket draws its threshold %gs", s.Name, l.Metric, l.Threshold)
		}
	}
	if n == 0 {
		t.Fatal("no latency SLO in rules/slos.yaml")
	}
	// Burn rates: the fastest page factor (14.4 in the SRE workbook) is a
	// red step, the slowest ticket factor above 1 an orange one.
	for _, f := range []string{fmt.Sprintf(`"color":"red","value":%s`, strconv.FormatFloat(b.pageFactor(), 'g', -1, 64)), `"color":"orange","value":3`} {
		if !bytes.Contains(compact(t, all), []byte(f)) {
			t.Errorf("no threshold step %s in the dashboards", f)
		}
	}
}

func compact(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(v)
		out.Write(j)
	}
	return out.Bytes()
}

// panelHasLine reports whether a time series panel reading metric draws a
// threshold step at value.
func panelHasLine(t *testing.T, metric string, value float64) bool {
	t.Helper()
	for _, d := range All() {
		for _, p := range rendered(t, d)["panels"].([]any) {
			p := p.(map[string]any)
			j, _ := json.Marshal(p["targets"])
			if p["type"] != "timeseries" || !bytes.Contains(j, []byte(metric)) {
				continue
			}
			fc, _ := p["fieldConfig"].(map[string]any)
			defaults, _ := fc["defaults"].(map[string]any)
			custom, _ := defaults["custom"].(map[string]any)
			style, _ := custom["thresholdsStyle"].(map[string]any)
			if style["mode"] == nil || style["mode"] == "off" {
				continue
			}
			th, _ := defaults["thresholds"].(map[string]any)
			steps, _ := th["steps"].([]any)
			for _, s := range steps {
				if v, ok := s.(map[string]any)["value"].(float64); ok && v == value {
					return true
				}
			}
		}
	}
	return false
}

// The staleness panel's red line is where KubeConvergenceWatchStale
// starts counting.
func TestWatchStaleLineMatchesTheAlert(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "rules", "kube-convergence-alerts.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`alert: KubeConvergenceWatchStale\s+expr: .*> (\d+)\n`).FindSubmatch(b)
	if m == nil {
		t.Fatal("KubeConvergenceWatchStale: expression `... > N` not found in the alerts")
	}
	if string(m[1]) != strconv.Itoa(watchStaleSeconds) {
		t.Errorf("KubeConvergenceWatchStale fires past %s s, the Watch health dashboard draws %d s: update watchStaleSeconds", m[1], watchStaleSeconds)
	}
}

// The sidecar ConfigMap holds exactly the committed dashboards, carries
// the sidecar's label, and stays small enough for a client-side apply.
func TestConfigMap(t *testing.T) {
	b, err := ConfigMap()
	if err != nil {
		t.Fatal(err)
	}
	// kubectl apply (client-side) copies the object into the
	// last-applied-configuration annotation, limited to 256 KiB.
	if len(b) > 256<<10-4<<10 {
		t.Errorf("ConfigMap is %d bytes: too close to the 256 KiB annotation limit of kubectl apply", len(b))
	}
	var cm struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name      string            `yaml:"name"`
			Namespace string            `yaml:"namespace"`
			Labels    map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Data map[string]string `yaml:"data"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(false)
	if err := dec.Decode(&cm); err != nil {
		t.Fatal(err)
	}
	if cm.APIVersion != "v1" || cm.Kind != "ConfigMap" || cm.Metadata.Labels["grafana_dashboard"] != "1" {
		t.Errorf("got %s %s labels %v, want a v1 ConfigMap labelled grafana_dashboard: \"1\"", cm.APIVersion, cm.Kind, cm.Metadata.Labels)
	}
	if len(cm.Data) != len(All()) {
		t.Errorf("ConfigMap has %d dashboards, want %d", len(cm.Data), len(All()))
	}
	for _, d := range All() {
		committed, err := os.ReadFile(d.File())
		if err != nil {
			t.Fatal(err)
		}
		var want, got any
		if err := json.Unmarshal(committed, &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(cm.Data[d.File()]), &got); err != nil {
			t.Errorf("ConfigMap %s: %v", d.File(), err)
			continue
		}
		wantJSON, _ := json.Marshal(want)
		gotJSON, _ := json.Marshal(got)
		if !bytes.Equal(wantJSON, gotJSON) {
			t.Errorf("ConfigMap %s differs from dashboards/%s (run make generate)", d.File(), d.File())
		}
	}
}

// The committed JSON decodes strictly into the SDK's dashboard schema
// (unknown or mistyped fields fail), panel options and queries included.
func TestStrictSchema(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	for _, d := range All() {
		b, err := os.ReadFile(d.File())
		if err != nil {
			t.Fatal(err)
		}
		var dash dashboard.Dashboard //nolint:staticcheck // the classic schema we generate (board.dashboard)
		// The SDK returns its error list as an error even when it is
		// empty (a typed nil).
		if err := dash.UnmarshalJSONStrict(b); err != nil {
			if be := cog.BuildErrors(nil); errors.As(err, &be) && len(be) == 0 {
				continue
			}
			t.Errorf("%s: %v", d.File(), err)
		}
	}
}

// The tables of stalled rollouts link each name to the object's timeline
// on the exporter, through the exporter_url variable and the row's kind,
// timeline_namespace ("_" for a cluster-scoped custom resource) and name;
// the queries add timeline_namespace, the table hides it.
func TestStalledTablesLinkToTimelines(t *testing.T) {
	want := map[string]string{
		"kce-overview / \"Top stalled rollouts\" / column name": "",
		"kce-rollouts / \"Stalled rollouts\" / column Name":     "",
	}
	for _, d := range All() {
		p := parsed(t, d)
		for _, l := range p.Links {
			if _, ok := want[l.String()]; !ok {
				t.Errorf("unexpected link %s", l)
				continue
			}
			want[l.String()] = l.URL
			i := slices.IndexFunc(p.Variables, func(v Variable) bool { return v.Name == exporterURLVar })
			if i < 0 {
				t.Errorf("%s: the dashboard has no variable %s", l, exporterURLVar)
				continue
			}
			// --web.external-url as written, with or without a trailing
			// slash (http://host/kce/ is the usual spelling): the link
			// has one slash before timelines, else a proxy that strips
			// /kce passes //timelines/..., which Go's ServeMux redirects
			// to /timelines/..., outside the prefix.
			for _, external := range []string{"https://kce.example.com/kce", "https://kce.example.com/kce/", "https://kce.example.com/kce//"} {
				base, ok, err := p.Variables[i].Value(external)
				if err != nil || !ok {
					t.Errorf("%s: variable %s drops %q: %v", l, exporterURLVar, external, err)
					continue
				}
				vars := map[string]string{exporterURLVar: base}
				for _, c := range []struct{ ns, want string }{
					{"shop", "https://kce.example.com/kce/timelines/Deployment/shop/web"},
					{"_", "https://kce.example.com/kce/timelines/Deployment/_/web"},
				} {
					got, err := ExpandLink(l.URL, vars, map[string]string{"kind": "Deployment", "namespace": c.ns, timelineNamespace: c.ns, "name": "web"})
					if err != nil || got != c.want {
						t.Errorf("%s with --web.external-url=%s: %q, %v; want %q", l, external, got, err, c.want)
					}
				}
			}
			for _, tg := range p.Targets {
				if tg.Panel == l.Panel && !strings.Contains(tg.Expr, timelineNamespace) {
					t.Errorf("%s: query %s does not add %s", l, tg.RefID, timelineNamespace)
				}
			}
		}
	}
	for l, url := range want {
		if url == "" {
			t.Errorf("no timeline link on %s", l)
		}
	}
	if _, err := ExpandLink(timelineLinkURL, map[string]string{exporterURLVar: "x"}, map[string]string{"kind": "Deployment", "name": "web"}); err == nil {
		t.Error("ExpandLink accepted a row without timeline_namespace")
	}
}
