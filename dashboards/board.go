package dashboards

import (
	"errors"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// gridWidth is Grafana's grid: 24 columns.
const gridWidth = 24

// board collects one dashboard's variables and panels and places the
// panels itself, line by line: every line starts at x 0 below the tallest
// panel of the line before, and a line wider than the grid is an error,
// not a silent overflow.
type board struct {
	description string
	vars        []cog.Builder[dashboard.VariableModel]
	items       []dashboard.PanelOrRowPanel
	y           uint32
	id          uint32
	errs        []error
}

func newBoard(description string, vars ...cog.Builder[dashboard.VariableModel]) *board {
	return &board{description: description, vars: vars}
}

// row starts a section: a full-width, expanded row header.
func (b *board) row(title string) {
	b.id++
	r := dashboard.NewRowPanel()
	r.Title = &title
	r.Id = b.id
	r.Panels = []dashboard.Panel{} // expanded rows keep their panels at the top level
	r.GridPos = &dashboard.GridPos{X: 0, Y: b.y, W: gridWidth, H: 1}
	b.items = append(b.items, dashboard.PanelOrRowPanel{RowPanel: r})
	b.y++
}

// cell is one panel of a line, w columns wide.
type cell struct {
	w     uint32
	panel cog.Builder[dashboard.Panel]
}

func span(w uint32, p cog.Builder[dashboard.Panel]) cell { return cell{w: w, panel: p} }

// line places cells side by side, h grid units high.
func (b *board) line(h uint32, cells ...cell) {
	var x uint32
	for _, c := range cells {
		p, err := c.panel.Build()
		if err != nil {
			b.errs = append(b.errs, err)
			continue
		}
		if x+c.w > gridWidth {
			b.errs = append(b.errs, fmt.Errorf("panel %q at x %d, %d wide: past the %d-column grid", deref(p.Title), x, c.w, gridWidth))
		}
		b.id++
		id := b.id
		p.Id = &id
		p.GridPos = &dashboard.GridPos{X: x, Y: b.y, W: c.w, H: h}
		b.items = append(b.items, dashboard.PanelOrRowPanel{Panel: &p})
		x += c.w
	}
	b.y += h
}

// dashboard builds the dashboard around the placed panels.
//
// The SDK deprecates this (classic, schemaVersion 42) dashboard for
// dashboardv2, which only Grafana 12's new dashboard API and its feature
// flag accept; the sidecar, JSON import and file provisioning take the
// classic JSON everywhere.
//
//nolint:staticcheck // classic dashboards on purpose, see above
func (b *board) dashboard(d Dashboard) (dashboard.Dashboard, error) {
	if err := errors.Join(b.errs...); err != nil {
		return dashboard.Dashboard{}, err
	}
	dash, err := dashboard.NewDashboardBuilder(d.Title).
		Uid(d.UID).
		Description(b.description).
		Tags([]string{Tag}).
		Readonly().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Time("now-1h", "now").
		Refresh("30s"). // the ServiceMonitor's scrape interval
		Timezone(common.TimeZoneBrowser).
		Variables(b.vars).
		Link(dashboard.NewDashboardLinkBuilder("Kubernetes convergence").
			Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{Tag}).
			AsDropdown(true).
			IncludeVars(true).
			KeepTime(true)).
		Link(dashboard.NewDashboardLinkBuilder("Exporter").
			Type(dashboard.DashboardLinkTypeLink).
			// exporterURLVar: the exporter's --web.external-url.
			Url("${" + exporterURLVar + "}").
			Icon("external link").
			Tooltip("The exporter's own pages (--web.external-url); empty when the flag is not set").
			TargetBlank(true)).
		Build()
	if err != nil {
		return dashboard.Dashboard{}, err
	}
	for i := range dash.Links {
		// The SDK's default placement, inControlsMenu, hides the links in
		// a menu; without it Grafana shows them in the dashboard's header.
		dash.Links[i].Placement = nil
	}
	dash.Panels = b.items
	return dash, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func ptr[T any](v T) *T { return &v }

// datasource is every panel's and query's data source: the datasource
// variable, so that the dashboards work with any Prometheus data source.
var datasource = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}

// Variable names shared by the dashboards.
const (
	exporterURLVar = "exporter_url"
	allValue       = ".*" // the All value of every multi-value variable, as the queries use =~
)

func datasourceVariable() cog.Builder[dashboard.VariableModel] {
	return dashboard.NewDatasourceVariableBuilder("datasource").
		Label("Data source").
		Type("prometheus")
}

// queryVariable is a multi-value label variable with All = .*, refreshed
// with the time range so that new namespaces and kinds appear.
func queryVariable(name, label, query, description string) *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Description(description).
		Query(dashboard.StringOrMap{String: ptr(query)}).
		Definition(query).
		Datasource(datasource).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(true).
		IncludeAll(true).
		AllValue(allValue).
		Current(dashboard.VariableOption{
			Text:  dashboard.StringOrArrayOfString{ArrayOfString: []string{"All"}},
			Value: dashboard.StringOrArrayOfString{ArrayOfString: []string{"$__all"}},
		})
}

// clusterVariable selects on the label cluster, which only multi-cluster
// setups have (an external label, or a target label added by relabelling);
// without it the variable offers just All, and cluster=~".*" also matches
// series without the label.
func clusterVariable() cog.Builder[dashboard.VariableModel] {
	return queryVariable("cluster", "Cluster", `label_values(kube_convergence_build_info, cluster)`,
		"The cluster label of multi-cluster setups; only All when there is none.")
}

// exporterURLVariable reads the exporter's --web.external-url for the
// dashboard link "Exporter" and the stalled tables' timeline links. Hidden:
// it is not a filter. Its regex drops the URL's trailing slashes (the flag
// is often written http://host/kce/): the links append /timelines/..., and
// a proxy that strips /kce would pass //timelines/..., which Go's ServeMux
// redirects to /timelines/..., outside the prefix. Grafana takes a regex's
// first capture group as the value.
func exporterURLVariable() cog.Builder[dashboard.VariableModel] {
	q := `label_values(kube_convergence_web_info{cluster=~"$cluster"}, external_url)`
	return dashboard.NewQueryVariableBuilder(exporterURLVar).
		Label("Exporter URL").
		Description("kube_convergence_web_info{external_url}: the exporter's --web.external-url without its trailing slashes, for the Exporter link and the timeline links.").
		Query(dashboard.StringOrMap{String: ptr(q)}).
		Definition(q).
		Regex(`/^(.*?)\/*$/`).
		Datasource(datasource).
		Refresh(dashboard.VariableRefreshOnDashboardLoad).
		Hide(dashboard.VariableHideHideVariable)
}

// query is one Prometheus target.
type query = *prometheus.DataqueryBuilder

func newQuery(expr string) query {
	return prometheus.NewDataqueryBuilder().Datasource(datasource).Expr(expr)
}

// series is a range query drawn over time.
func series(expr, legend string) query { return newQuery(expr).Range().LegendFormat(legend) }

// instant is an instant query for stat and bar gauge panels: the value now.
func instant(expr, legend string) query { return newQuery(expr).Instant().LegendFormat(legend) }

// tableQuery is an instant query whose labels become table columns.
func tableQuery(expr string) query {
	return newQuery(expr).Instant().Format(prometheus.PromQueryFormatTable)
}

// heatmapQuery is a range query of per-bucket increases, le as the y axis.
func heatmapQuery(expr string) query {
	return newQuery(expr).Range().Format(prometheus.PromQueryFormatHeatmap).LegendFormat("{{le}}")
}

// withRefIDs names targets A, B, C... in order; tables refer to their
// columns as "Value #A" and so on.
func withRefIDs(qs []query) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], len(qs))
	for i, q := range qs {
		out[i] = q.RefId(string(rune('A' + i)))
	}
	return out
}

// step is one threshold step; the first step of a list is the base colour
// and its value is ignored.
type step struct {
	value float64
	color string
}

func thresholdsConfig(steps []step) dashboard.ThresholdsConfig {
	out := dashboard.ThresholdsConfig{Mode: dashboard.ThresholdsModeAbsolute}
	for i, s := range steps {
		t := dashboard.Threshold{Color: s.color}
		if i > 0 {
			t.Value = ptr(s.value)
		}
		out.Steps = append(out.Steps, t)
	}
	return out
}

func thresholds(steps ...step) *dashboard.ThresholdsConfigBuilder {
	c := thresholdsConfig(steps)
	return dashboard.NewThresholdsConfigBuilder().Mode(c.Mode).Steps(c.Steps)
}

// Field override properties.
func unitProp(unit string) dashboard.DynamicConfigValue {
	return dashboard.DynamicConfigValue{Id: "unit", Value: unit}
}

func thresholdsProp(steps ...step) dashboard.DynamicConfigValue {
	return dashboard.DynamicConfigValue{Id: "thresholds", Value: thresholdsConfig(steps)}
}

func decimalsProp(d int) dashboard.DynamicConfigValue {
	return dashboard.DynamicConfigValue{Id: "decimals", Value: d}
}

func cellColorProp() dashboard.DynamicConfigValue {
	return dashboard.DynamicConfigValue{Id: "custom.cellOptions", Value: map[string]any{"type": "color-background"}}
}
