package dashboards

import (
	"fmt"
	"maps"
	"slices"

	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// The panel constructors set what every panel of a kind shares: the data
// source, the title, the description (what the number means and when the
// panel is legitimately empty) and the unit. Dashboards add thresholds and
// overrides.

func timeseriesPanel(title, description, unit string, qs ...query) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Targets(withRefIDs(qs)).
		Unit(unit).
		// Durations, counts and rates start at 0; soft, so that a value
		// below (a spent error budget) still shows.
		AxisSoftMin(0).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().
			ShowLegend(true).
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom)).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending))
}

// thresholdLines draws the thresholds as lines on a time series panel.
func thresholdLines(p *timeseries.PanelBuilder, steps ...step) *timeseries.PanelBuilder {
	return p.Thresholds(thresholds(steps...)).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed))
}

func statPanel(title, description, unit string, qs ...query) *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Targets(withRefIDs(qs)).
		Unit(unit).
		ColorMode(common.BigValueColorModeBackground).
		GraphMode(common.BigValueGraphModeNone).
		TextMode(common.BigValueTextModeValueAndName).
		Orientation(common.VizOrientationAuto).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Values(false))
}

func bargaugePanel(title, description, unit string, qs ...query) *bargauge.PanelBuilder {
	return bargauge.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Targets(withRefIDs(qs)).
		Unit(unit).
		Min(0).
		DisplayMode(common.BarGaugeDisplayModeGradient).
		Orientation(common.VizOrientationHorizontal).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Values(false))
}

// tablePanel shows instant table queries. With several targets their rows
// are merged on the common labels (one row per object), and the value
// columns are renamed by rename ("Value #A" -> "Stalled for"); hide lists
// label columns not worth a column.
func tablePanel(title, description string, rename map[string]string, hide []string, qs ...query) *table.PanelBuilder {
	exclude := map[string]any{"Time": true}
	for _, h := range hide {
		exclude[h] = true
	}
	p := table.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Targets(withRefIDs(qs)).
		CellHeight(common.TableCellHeightSm).
		// The SDK's default footer has "reducer": null, which its own
		// schema (and Grafana's) rejects: a footer without a reducer.
		Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{"sum"}))
	if len(qs) > 1 {
		p.WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}})
	}
	return p.WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
		"excludeByName": exclude,
		"renameByName":  rename,
	}})
}

// heatmapPanel shows a classic histogram's bucket increases over time
// (Prometheus' le buckets, not recalculated by Grafana), with exemplars.
func heatmapPanel(title, description string, q query) *heatmap.PanelBuilder {
	return heatmap.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Targets(withRefIDs([]query{q.Exemplar(true)})).
		Calculate(false).
		RowsFrame(heatmap.NewRowsHeatmapOptionsBuilder().Layout(common.HeatmapCellLayoutLe)).
		YAxis(heatmap.NewYAxisConfigBuilder().Unit(units.Seconds)).
		CellValues(heatmap.NewCellValuesBuilder().Unit(units.Short)).
		Color(heatmap.NewHeatmapColorOptionsBuilder().
			Mode(heatmap.HeatmapColorModeScheme).
			Scheme("Oranges").
			Scale(heatmap.HeatmapColorScaleExponential).
			Exponent(0.5).
			Steps(64)).
		ShowValue(common.VisibilityModeNever).
		ExemplarsColor("rgba(255,0,255,0.7)").
		Tooltip(heatmap.NewHeatmapTooltipBuilder().Mode(common.TooltipDisplayModeSingle).YHistogram(true))
}

// valueMap maps exact values to text and colour (collector up, synced).
func valueMap(m map[string][2]string) []dashboard.ValueMapping {
	opts := map[string]dashboard.ValueMappingResult{}
	for i, v := range slices.Sorted(maps.Keys(m)) { // stable indexes: the JSON is committed
		opts[v] = dashboard.ValueMappingResult{Text: ptr(m[v][0]), Color: ptr(m[v][1]), Index: ptr(int32(i))}
	}
	return []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: opts}}}
}

// timelineNamespace is a label the stalled-rollouts queries add for the
// timeline link: the namespace, or "_" for a cluster-scoped custom
// resource (the timeline API's and page's path segment). Hidden in the
// table, not excluded: an excluded column is removed from the frame, and
// the link could not read it.
const timelineNamespace = "timeline_namespace"

// clusterScope is the namespace path segment of a cluster-scoped object in
// the exporter's /timelines and /api/v1/timelines.
const clusterScope = "_"

// withTimelineNamespace adds timelineNamespace to the series of expr:
// label_join of the one label copies the namespace (no capture group: $1
// reads as a dashboard variable to Grafana), then label_replace, whose
// regex is anchored, writes "_" where the namespace is empty.
func withTimelineNamespace(expr string) string {
	return fmt.Sprintf(`label_replace(label_join(%s, %q, "", "namespace"), %q, %q, "namespace", "")`,
		expr, timelineNamespace, timelineNamespace, clusterScope)
}

// timelineLinkURL is the exporter's timeline page of a table row's object:
// <external-url>/timelines/{kind}/{namespace}/{name}, external-url read
// from kube_convergence_web_info by exporterURLVariable. The row's label
// columns are read by their label names (a column renamed for display
// keeps its name). Kinds (Deployment, Kind.group), namespaces and names
// are DNS names and URL-safe: no encoding needed.
var timelineLinkURL = "${" + exporterURLVar + "}/timelines/${__data.fields.kind}/${__data.fields." + timelineNamespace + "}/${__data.fields.name}"

// timelineLinkHelp ends the description of a table with timeline links.
const timelineLinkHelp = "A name links to the object's timeline on the exporter's page (the evidence of every retained generation: " +
	"writes, ReplicaSets, pods, scheduling, Warning Events; docs/timelines.md), at the exporter's --web.external-url."

// withTimelineLink makes the name column of a table of stalled rollouts
// (queries through withTimelineNamespace) a link to the object's timeline
// on the exporter's page, and hides the timelineNamespace column.
func withTimelineLink(p *table.PanelBuilder, nameColumn string) *table.PanelBuilder {
	return p.
		OverrideByName(nameColumn, []dashboard.DynamicConfigValue{{Id: "links", Value: []map[string]any{{
			"title":       "Timeline of ${__data.fields.kind} ${__data.fields.namespace}/${__data.fields.name} on the exporter",
			"url":         timelineLinkURL,
			"targetBlank": true,
		}}}}).
		OverrideByName(timelineNamespace, []dashboard.DynamicConfigValue{{Id: "custom.hidden", Value: true}})
}
