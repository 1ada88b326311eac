package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/kube-convergence/kube-convergence-exporter/slo"
)

// valueAPI answers every instant query with one sample of value and
// every range query with one series of value at each step: the JSON
// encoding Prometheus gives NaN and ±Inf ("NaN", "+Inf", "-Inf").
func valueAPI(t *testing.T, value string, warnings ...string) v1.API {
	t.Helper()
	ws, _ := json.Marshal(append([]string{}, warnings...))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/query_range") {
			fmt.Fprintf(w, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[%s,%q]]}]},"warnings":%s}`, r.Form.Get("start"), value, ws)
			return
		}
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[%s,%q]}]},"warnings":%s}`, r.Form.Get("time"), value, ws)
	}))
	t.Cleanup(srv.Close)
	c, err := api.NewClient(api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return v1.NewAPI(c)
}

// A NaN or infinite value (a ratio query dividing by zero) is a query
// error naming the query, never an attainment: 1 - NaN/total < objective
// is false, which read as "met".
func TestNonFiniteValueIsAQueryError(t *testing.T) {
	f, err := slo.Parse("ratio.yaml", []byte(`service: shop
slos:
  - name: ratio
    objective: 0.99
    period: 7d
    sli:
      ratio:
        errorQuery: sum(rate(kube_convergence_relists_total{reason="expired"}[{{.window}}]))
        totalQuery: sum(rate(kube_convergence_relists_total[{{.window}}]))
`))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"NaN", "+Inf", "-Inf"} {
		t.Run(v, func(t *testing.T) {
			r, err := Build(context.Background(), valueAPI(t, v), f, Options{At: at, Source: "http://prometheus:9090"})
			var qe *QueryError
			if !errors.As(err, &qe) || !errors.Is(err, ErrNonFinite) {
				t.Fatalf("Build = %+v, %v; want a QueryError wrapping ErrNonFinite", r, err)
			}
			if qe.SLO != "shop-ratio" || !strings.Contains(qe.Query, "kube_convergence_relists_total") || !strings.Contains(err.Error(), v[len(v)-3:]) {
				t.Errorf("error %q does not name the SLO, the query and the value", err)
			}
		})
	}
	// A finite answer builds: the check is not vacuous.
	if _, err := Build(context.Background(), valueAPI(t, "2"), f, Options{At: at, Source: "http://prometheus:9090"}); err != nil {
		t.Errorf("finite values: %v", err)
	}
}

// A ratio SLI whose errorQuery is a difference gets an apportioned,
// labelled chart; one that adds up rates does not.
func TestChartBadApportioned(t *testing.T) {
	at := time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)
	for errQ, want := range map[string]bool{
		`sum(rate(a_total{code="5xx"}[{{.window}}]))`:                          false,
		`sum(rate(a_total[{{.window}}])) - sum(rate(good_total[{{.window}}]))`: true,
	} {
		f, err := slo.Parse("ratio.yaml", []byte(`service: shop
slos:
  - name: ratio
    objective: 0.99
    period: 7d
    sli:
      ratio:
        errorQuery: `+errQ+`
        totalQuery: sum(rate(a_total[{{.window}}]))
`))
		if err != nil {
			t.Fatal(err)
		}
		r, err := Build(context.Background(), valueAPI(t, "2"), f, Options{At: at, Source: "http://prometheus:9090"})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.SLOs[0].Chart.BadApportioned; got != want {
			t.Errorf("%s: badApportioned %v, want %v", errQ, got, want)
		}
		var b strings.Builder
		if err := Render(&b, r, FormatText); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(b.String(), "approximate") != want {
			t.Errorf("%s: the text report says approximate: %v, want %v", errQ, !want, want)
		}
	}
}

// The API's warnings gathered before a failing query are returned with
// the error: a partial response may explain it.
func TestWarningsBeforeAnErrorAreKept(t *testing.T) {
	f, err := slo.Parse("lat.yaml", []byte(`service: shop
slos:
  - name: rollouts
    objective: 0.99
    period: 7d
    sli:
      latency: {metric: kube_convergence_rollout_duration_seconds, threshold: 300}
`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Build(context.Background(), valueAPI(t, "NaN", "partial response: store 10.0.0.7:10901 unavailable"), f, Options{At: time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC), Source: "http://prometheus:9090"})
	if err == nil {
		t.Fatal("Build succeeded on NaN")
	}
	if r == nil || len(r.Warnings) != 1 || r.Warnings[0] != "shop-rollouts: partial response: store 10.0.0.7:10901 unavailable" {
		t.Errorf("warnings with the error: %+v", r)
	}
}
