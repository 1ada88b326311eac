package dashboards

import (
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// grafanaInterpolate is what Grafana does to every value of a provisioning
// file (interpolateValue in grafana/pkg/services/provisioning/values/values.go):
// split on "$$", expand $NAME and ${NAME} from the environment in each part,
// join the parts with "$".
func grafanaInterpolate(v string, env map[string]string) string {
	parts := strings.Split(v, "$$")
	for i, p := range parts {
		parts[i] = os.Expand(p, func(k string) string { return env[k] })
	}
	return strings.Join(parts, "$")
}

// The provisioned data source, as Grafana reads it with the environment of
// docs/timelines.md: exemplar label uid links to the exporter's page for
// that uid, trace_id opens the tracing data source.
func TestDatasourceExemplarLinks(t *testing.T) {
	b, err := Datasource()
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, UID, Type, Access, URL string
			Editable                     bool
			JSONData                     struct {
				HTTPMethod   string `yaml:"httpMethod"`
				TimeInterval string `yaml:"timeInterval"`
				Destinations []struct {
					Name            string `yaml:"name"`
					URL             string `yaml:"url"`
					DatasourceUID   string `yaml:"datasourceUid"`
					URLDisplayLabel string `yaml:"urlDisplayLabel"`
				} `yaml:"exemplarTraceIdDestinations"`
			} `yaml:"jsonData"`
		}
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatal(err)
	}
	if f.APIVersion != 1 || len(f.Datasources) != 1 {
		t.Fatalf("apiVersion %d, %d data sources; want 1 and 1", f.APIVersion, len(f.Datasources))
	}
	ds := f.Datasources[0]
	env := map[string]string{EnvExternalURL: "https://kce.example.com/kce", EnvPrometheusURL: "http://prometheus-operated.monitoring:9090"}
	if ds.Type != "prometheus" || ds.UID != DatasourceUID || grafanaInterpolate(ds.URL, env) != "http://prometheus-operated.monitoring:9090" {
		t.Errorf("data source %+v", ds)
	}
	dests := ds.JSONData.Destinations
	if len(dests) != 2 {
		t.Fatalf("%d exemplar destinations, want uid and trace_id", len(dests))
	}
	if d := dests[0]; d.Name != "uid" || d.DatasourceUID != "" ||
		grafanaInterpolate(d.URL, env) != "https://kce.example.com/kce/timelines?uid=${__value.raw}" {
		t.Errorf("uid destination %+v interpolates to %q", d, grafanaInterpolate(d.URL, env))
	}
	if d := dests[1]; d.Name != "trace_id" || d.URL != "" || d.DatasourceUID != TracingDatasourceUID {
		t.Errorf("trace_id destination %+v", d)
	}
}
