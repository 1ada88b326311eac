package e2e

import (
	"context"
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/kube-convergence/kube-convergence-exporter/dashboards"
	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

// checkTimelineLinks follows the data links of the dashboards' tables as
// Grafana would for the rows a real Prometheus returns: exporter_url set to
// the exporter (what --web.external-url would say), the row's labels as
// ${__data.fields.*}. Every link of every row opens the object's timeline
// page on the exporter (200, naming the object), and the demo's
// quota-blocked Deployment is among the rows.
func checkTimelineLinks(ctx context.Context, t *testing.T, prom *sandbox.Prometheus, boards []*dashboards.Parsed, e *exporterProc, rangeNow func() dashboards.Intervals) {
	t.Helper()
	links, followed := 0, 0
	for _, b := range boards {
		for _, l := range b.Links {
			links++
			var rows []map[string]string
			for _, tg := range b.Targets {
				if tg.Panel != l.Panel || tg.RefID != "A" {
					continue
				}
				expr, err := dashboards.Expand(tg.Expr, b.Variables, rangeNow())
				if err != nil {
					t.Fatal(err)
				}
				v, err := prom.Query(ctx, expr)
				if err != nil {
					t.Errorf("%s: %v", l, err)
					continue
				}
				for _, s := range v {
					row := map[string]string{}
					for k, val := range s.Metric {
						row[string(k)] = string(val)
					}
					rows = append(rows, row)
				}
			}
			quota := "/timelines/Deployment/" + demo.QuotaNamespace + "/over-quota"
			sawQuota := false
			for _, row := range rows {
				u, err := dashboards.ExpandLink(l.URL, map[string]string{"exporter_url": e.url}, row)
				if err != nil {
					t.Errorf("%s: row %v: %v", l, row, err)
					continue
				}
				sawQuota = sawQuota || u == e.url+quota
				followed++
				code, body, err := e.get(strings.TrimPrefix(u, e.url))
				if err != nil || code != http.StatusOK || !strings.Contains(html.UnescapeString(body), row["name"]) {
					t.Errorf("%s: row %v: GET %s = %d (%v), want 200 and the page of %s", l, row, u, code, err, row["name"])
				}
			}
			if !sawQuota {
				t.Errorf("%s: no row links to %s%s; rows: %v", l, e.url, quota, rows)
			}
		}
	}
	if links == 0 {
		t.Error("no data links in the dashboards")
	}
	t.Logf("%d timeline links followed for every row of their tables: %d pages opened", links, followed)
}
