package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/config"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline/web"
)

// Exit codes of `explain` (docs/timelines.md#explain).
const (
	explainOK     = 0
	explainFailed = 1 // no timeline of the object (404), the exporter unreachable or answering another error
	explainUsage  = 2 // bad usage, an unknown kind (the API's 400)
)

// Output formats of `explain`.
const (
	explainText = "text"
	explainJSON = "json"
)

// clusterScope is the namespace segment of a cluster-scoped object in the
// timeline API's path.
const clusterScope = "_"

// maxAPIBody bounds what explain reads of an answer, against a URL that
// serves something else without end; one object's retained generations at
// 200 entries each are a few hundred KB.
const maxAPIBody = 64 << 20

// addExplainCommand adds `explain` (docs/timelines.md#explain). now is the
// clock of the "ago" of the text output.
func addExplainCommand(app *kingpin.Application, now func() time.Time) (dispatch func(cmd string, stdout, stderr io.Writer) (handled bool, exitCode int)) {
	cmd := app.Command("explain", "Print the timeline of one object's rollouts from a running exporter's /api/v1/timelines: per retained generation, newest first (every page of the API's answer, up to 50), its state, the stage holding it and why, the stages and every piece of evidence (docs/timelines.md#explain). Exit 0; 1 when the exporter has no timeline of the object or cannot be reached; 2 on bad usage or an unknown kind.")
	object := cmd.Arg("object", "KIND/NAME, the kind as kubectl writes it (deployment/web, deploy/web, deployments.apps/web, Deployment/web) or Kind.group for a custom resource (Certificate.cert-manager.io/web).").Required().String()
	namespace := cmd.Flag("namespace", "Namespace of the object; empty for a cluster-scoped object.").Short('n').Default("").String()
	exporterURL := cmd.Flag("exporter.url", "Base URL of the exporter, e.g. http://kube-convergence-exporter.kube-convergence:10329 (its --web.external-url).").Required().String()
	httpConfig := cmd.Flag("exporter.http.config.file", "HTTP client configuration for the exporter, promtool's --http.config.file format: TLS CA and client certificate, basic auth, bearer token (file), http_headers; matches the exporter's --web.config.file.").Default("").String()
	format := cmd.Flag("output", "Output format: text, or json (the API's answer, indented).").Short('o').Default(explainText).Enum(explainText, explainJSON)
	timeout := cmd.Flag("timeout", "Bound on the request.").Default("30s").Duration()

	return func(c string, stdout, stderr io.Writer) (bool, int) {
		if c != cmd.FullCommand() {
			return false, 0
		}
		// Every message is escaped as a whole (web.Visible): it holds
		// what the command line and the server chose (an error's text, a
		// redirect's host, an answer's body), any of which may carry
		// terminal controls or bidirectional overrides.
		fail := func(code int, format string, args ...any) (bool, int) {
			suffix := ""
			if code == explainUsage {
				suffix = " (see --help)"
			}
			fmt.Fprintf(stderr, "kube-convergence-exporter: explain: %s%s\n", web.Visible(fmt.Sprintf(format, args...)), suffix)
			return true, code
		}
		kind, name, ok := strings.Cut(*object, "/")
		if !ok || kind == "" || name == "" || strings.Contains(name, "/") {
			return fail(explainUsage, "%s: want KIND/NAME, such as deployment/web", *object)
		}
		// The path's segments: . and .. are no Kubernetes name
		// (apimachinery's path.IsValidPathSegmentName), and the
		// exporter's router would clean them away, answering for
		// another path.
		for _, seg := range [...]struct{ what, v string }{{"kind", kind}, {"name", name}, {"namespace", *namespace}} {
			if seg.v == "." || seg.v == ".." {
				return fail(explainUsage, "%s %q: no Kubernetes object is named . or ..", seg.what, seg.v)
			}
		}
		u, err := url.Parse(*exporterURL)
		if err != nil {
			// url.Parse's error quotes the URL, password and all.
			return fail(explainUsage, "--exporter.url: not a URL; want an http or https URL")
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fail(explainUsage, "--exporter.url %q: want an http or https URL", u.Redacted())
		}
		if *timeout <= 0 {
			return fail(explainUsage, "--timeout %s: want a positive duration such as 30s", *timeout)
		}
		client, err := explainClient(*httpConfig)
		if err != nil {
			return fail(explainFailed, "%v", err)
		}
		ns := *namespace
		if ns == "" {
			ns = clusterScope
		}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		target := timelineURL(u, kind, ns, name)
		status, body, err := get(ctx, client, target)
		if err != nil {
			return fail(explainFailed, "%v", err)
		}
		where := "namespace " + *namespace
		if *namespace == "" {
			where = "the cluster scope (a namespaced object needs -n NAMESPACE)"
		}
		switch {
		case status == http.StatusBadRequest:
			// An unknown kind: the API lists the accepted forms.
			return fail(explainUsage, "%s", apiError(body))
		case status == http.StatusNotFound:
			return fail(explainFailed, "%s has no timeline of %s in %s: %s", target.Redacted(), *object, where, apiError(body))
		case status != http.StatusOK:
			return fail(explainFailed, "GET %s: %s: %s", target.Redacted(), http.StatusText(status), apiError(body))
		}
		items, next, err := episodesPage(body)
		if err != nil {
			return fail(explainFailed, "GET %s: not a timeline answer: %v", target.Redacted(), err)
		}
		// The API answers a page of the object's episodes at a time
		// (web.DefaultObjectLimit) with a link to the next: follow it, up
		// to maxExplainPages pages.
		for pages := 1; next != ""; pages++ {
			if pages == maxExplainPages {
				fmt.Fprintf(stderr, "kube-convergence-exporter: explain: stopped after %d pages (%d episodes); older ones are left\n", pages, len(items))
				break
			}
			ref, err := url.Parse(next)
			if err != nil {
				return fail(explainFailed, "GET %s: a next link that is not a URL", target.Redacted())
			}
			page := u.ResolveReference(ref)
			if page.Scheme != u.Scheme || page.Host != u.Host {
				// The client sends the exporter's credentials with every
				// request: never to another host (see explainClient).
				return fail(explainFailed, "GET %s: a next link to another host, %s://%s: not following", target.Redacted(), page.Scheme, page.Host)
			}
			status, body, err := get(ctx, client, page)
			if err != nil {
				return fail(explainFailed, "%v", err)
			}
			if status != http.StatusOK {
				return fail(explainFailed, "GET %s: %s: %s", page.Redacted(), http.StatusText(status), apiError(body))
			}
			more, n, err := episodesPage(body)
			if err != nil {
				return fail(explainFailed, "GET %s: not a timeline answer: %v", page.Redacted(), err)
			}
			items, next = append(items, more...), n
		}
		if len(items) == 0 {
			return fail(explainFailed, "%s has no timeline of %s in %s", target.Redacted(), *object, where)
		}
		if *format == explainJSON {
			// Every page's items, as the API wrote them, in one answer.
			all := []byte(`{"items":[`)
			for i, raw := range items {
				if i > 0 {
					all = append(all, ',')
				}
				all = append(all, raw...)
			}
			if err := writeJSON(stdout, append(all, "]}\n"...)); err != nil { // as the API ends its answer
				return fail(explainFailed, "GET %s: %v", target.Redacted(), err)
			}
			return true, explainOK
		}
		eps := make([]timeline.Episode, len(items))
		for i, raw := range items {
			if err := json.Unmarshal(raw, &eps[i]); err != nil {
				return fail(explainFailed, "GET %s: not a timeline answer: %v", target.Redacted(), err)
			}
		}
		web.WriteText(stdout, eps, now())
		return true, explainOK
	}
}

// maxExplainPages bounds the pages explain reads of one object's
// timeline: 50 pages of web.DefaultObjectLimit episodes are 1,000, as
// many as an exporter retains by default (--timelines.retained), against
// a server whose next links never end.
const maxExplainPages = 50

// episodesPage reads a page of the object endpoint: its items, each as the
// API wrote it, and its next link ("" on the last page).
func episodesPage(body []byte) ([]json.RawMessage, string, error) {
	var page struct {
		Items []json.RawMessage `json:"items"`
		Next  string            `json:"next"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, "", err
	}
	return page.Items, page.Next, nil
}

// explainClient builds the HTTP client; configFile is promtool's
// --http.config.file format (prometheus/common's HTTPClientConfig).
func explainClient(configFile string) (*http.Client, error) {
	cfg := config.DefaultHTTPClientConfig
	if configFile != "" {
		c, _, err := config.LoadHTTPConfigFile(configFile)
		if err != nil {
			return nil, fmt.Errorf("--exporter.http.config.file: %w", err)
		}
		cfg = *c
	}
	client, err := config.NewClientFromConfig(cfg, "kube-convergence-exporter-explain")
	if err != nil {
		return nil, fmt.Errorf("--exporter.http.config.file: %w", err)
	}
	// prometheus/common's round tripper sets the credentials on every
	// request, a redirect's included (Go's client drops an Authorization
	// header it copies to another host, not one a round tripper adds): a
	// proxy redirecting to a login page elsewhere would receive the token
	// or the password. Redirects are followed on the exporter's scheme and
	// host only.
	follow := client.CheckRedirect // follow_redirects: false stops them all
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if first := via[0].URL; req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
			return fmt.Errorf("redirected to another host, %s://%s: not following with the exporter's credentials", req.URL.Scheme, req.URL.Host)
		}
		if follow != nil {
			return follow(req, via)
		}
		if len(via) >= 10 { // Go's default policy
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return client, nil
}

// timelineURL is base's /api/v1/timelines/{kind}/{namespace}/{name}, under
// base's path (an exporter behind a path prefix), each segment escaped.
func timelineURL(base *url.URL, kind, namespace, name string) *url.URL {
	u := *base
	u.RawQuery, u.Fragment = "", ""
	segs := []string{"api", "v1", "timelines", kind, namespace, name}
	raw := strings.TrimSuffix(base.EscapedPath(), "/")
	plain := strings.TrimSuffix(base.Path, "/")
	for _, s := range segs {
		raw += "/" + url.PathEscape(s)
		plain += "/" + s
	}
	u.Path, u.RawPath = plain, raw
	return &u
}

// get fetches target; the error names the URL (its password redacted).
func get(ctx context.Context, client *http.Client, target *url.URL) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return 0, nil, fmt.Errorf("GET %s: %w", target.Redacted(), err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		// A *url.Error quotes the URL, password and all: keep its cause.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return 0, nil, fmt.Errorf("GET %s: exporter unreachable: %w", target.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBody))
	if err != nil {
		return 0, nil, fmt.Errorf("GET %s: reading the answer: %w", target.Redacted(), err)
	}
	return resp.StatusCode, body, nil
}

// apiError is the message of an error answer: the API's JSON error
// ({"error": "..."}), else the body's first 512 bytes (fail escapes it).
func apiError(body []byte) string {
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil {
		if e.Error != "" {
			return e.Error
		}
		if e.Message != "" {
			return e.Message
		}
	}
	s := strings.TrimSpace(string(body[:min(len(body), 512)]))
	if s == "" {
		return "empty answer"
	}
	return s
}

// writeJSON writes the API's answer indented. JSON escapes C0 controls
// but not C1 ones (U+0080-U+009F, U+009B being CSI on some terminals) nor
// other invisible runes: those are written as \u escapes, which mean the
// same in JSON, so the output is the API's answer and safe on a terminal.
func writeJSON(w io.Writer, body []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, body, "", "  "); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	var out strings.Builder
	for _, r := range buf.String() {
		if r == '\n' || r == ' ' || web.VisibleRune(r) {
			out.WriteRune(r)
			continue
		}
		if r > 0xffff { // a surrogate pair in JSON
			r -= 0x10000
			fmt.Fprintf(&out, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			continue
		}
		fmt.Fprintf(&out, `\u%04x`, r)
	}
	out.WriteByte('\n')
	_, err := io.WriteString(w, out.String())
	return err
}
