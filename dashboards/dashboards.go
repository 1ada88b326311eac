// Package dashboards generates the Grafana dashboards of
// kube-convergence-exporter with grafana-foundation-sdk. `make generate`
// (go run ./internal/gen) writes each one to dashboards/<uid>.json and all of
// them into one ConfigMap for Grafana's dashboard sidecar
// (deploy/components/grafana-dashboards/grafana-dashboards.yaml); both are committed, and
// internal/gen's staleness test fails when they are out of date.
//
// Three choices differ from the SDK's defaults, on purpose:
//
//   - Layout is explicit (see board): the SDK's automatic placement moves a
//     panel to the next line only after the running x has passed 24, so a
//     12-wide panel after an 18-wide one overflows the grid.
//   - Dashboards are not editable (the SDK default is editable: true): the
//     JSON is generated, so an edit in Grafana is lost at the next
//     provisioning; change the Go code instead.
//   - Thresholds come from the bundled SLOs (rules/slos.yaml, read through
//     package rules), so a changed objective or latency threshold changes
//     the colours and lines on the next `make generate`.
package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"

	"gopkg.in/yaml.v3"
)

// Dir holds the generated JSON files, relative to the repository root.
const Dir = "dashboards"

// Tag is on every dashboard; the dashboards link to each other through it.
const Tag = "kube-convergence"

// Dashboard is one generated dashboard.
type Dashboard struct {
	// UID is stable: Grafana URLs, bookmarks and links from alerts use it.
	// It is also the JSON file's name.
	UID   string
	Title string
	build func(*bundled) (*board, error)
}

// All returns every dashboard, in the order of the dashboards dropdown.
func All() []Dashboard {
	return []Dashboard{
		{UID: "kce-overview", Title: "Kubernetes convergence / Overview", build: overview},
		{UID: "kce-rollouts", Title: "Kubernetes convergence / Rollouts", build: rollouts},
		{UID: "kce-pods-endpoints", Title: "Kubernetes convergence / Pods and endpoints", build: podsAndEndpoints},
		{UID: "kce-watch", Title: "Kubernetes convergence / Watch health", build: watchHealth},
		{UID: "kce-exporter", Title: "Kubernetes convergence / Exporter", build: exporterHealth},
		{UID: "kce-controllers", Title: "Kubernetes convergence / Controllers", build: controllers},
		{UID: "kce-webhooks", Title: "Kubernetes convergence / Admission webhooks", build: webhooksBoard},
	}
}

// File is the JSON file's name in Dir and the key in the ConfigMap.
func (d Dashboard) File() string { return d.UID + ".json" }

// Path is the JSON file, slash-separated, relative to the repository root.
func (d Dashboard) Path() string { return path.Join(Dir, d.File()) }

// JSON renders the dashboard as Grafana's dashboard JSON (schemaVersion 42),
// indented so that a regenerated file diffs readably.
func (d Dashboard) JSON() ([]byte, error) {
	b, err := loadBundled()
	if err != nil {
		return nil, err
	}
	brd, err := d.build(b)
	if err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", d.UID, err)
	}
	dash, err := brd.dashboard(d)
	if err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", d.UID, err)
	}
	out, err := json.MarshalIndent(dash, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", d.UID, err)
	}
	return append(out, '\n'), nil
}

// ConfigMap renders deploy/components/grafana-dashboards/grafana-dashboards.yaml: every dashboard in
// one ConfigMap labelled for the sidecar of Grafana's Helm chart (and of
// kube-prometheus-stack), which loads every ConfigMap with the label
// grafana_dashboard in the namespaces it watches.
//
// The JSON is stored compact: the whole object must stay under 256 KiB for
// a client-side `kubectl apply`, which copies it into the
// last-applied-configuration annotation (a test checks the size).
func ConfigMap() ([]byte, error) {
	data := &yaml.Node{Kind: yaml.MappingNode}
	for _, d := range All() {
		pretty, err := d.JSON()
		if err != nil {
			return nil, err
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, pretty); err != nil {
			return nil, fmt.Errorf("dashboard %s: %w", d.UID, err)
		}
		data.Content = append(data.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Value: d.File()},
			&yaml.Node{Kind: yaml.ScalarNode, Value: compact.String(), Style: yaml.LiteralStyle})
	}
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }
	quoted := func(s string) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Value: s, Style: yaml.DoubleQuotedStyle}
	}
	mapping := func(kv ...*yaml.Node) *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Content: kv} }
	doc := mapping(
		str("apiVersion"), str("v1"),
		str("kind"), str("ConfigMap"),
		str("metadata"), mapping(
			str("name"), str("kube-convergence-exporter-dashboards"),
			str("namespace"), str("kube-convergence"),
			str("labels"), mapping(
				// The sidecar's default label; its value is not read.
				str("grafana_dashboard"), quoted("1"),
			),
			str("annotations"), mapping(
				// The folder, for sidecars started with
				// folderAnnotation: grafana_folder (ignored otherwise).
				str("grafana_folder"), str("Kubernetes convergence"),
			),
		),
		str("data"), data,
	)
	var out bytes.Buffer
	out.WriteString("# Code generated by \"go run ./internal/gen\" (make generate) from package\n" +
		"# dashboards. DO NOT EDIT: change the Go code and regenerate.\n" +
		"#\n" +
		"# The dashboards of dashboards/*.json for Grafana's dashboard sidecar, which\n" +
		"# loads ConfigMaps labelled grafana_dashboard. The sidecar must watch this\n" +
		"# namespace (kube-prometheus-stack: grafana.sidecar.dashboards.searchNamespace).\n")
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("grafana dashboards ConfigMap: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("grafana dashboards ConfigMap: %w", err)
	}
	return out.Bytes(), nil
}
