package report

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/api"
)

// MaxGetURL is the longest URL a query is sent as a GET with; longer
// ones are POSTed as a form. nginx refuses request lines over 8 KiB by
// default (large_client_header_buffers 4 8k), Apache over 8,190 bytes
// (LimitRequestLine), so 4 KiB stays clear of both with room for a path
// prefix.
const MaxGetURL = 4096

// NewClient wraps c for the report's queries (docs/report.md, "Behind a
// gateway"):
//
//   - /api/v1/query and /api/v1/query_range go out as GET with the
//     arguments in the URL when it fits in MaxGetURL. client_golang POSTs
//     them as a form, and a request body is what a gateway built on Go's
//     net/http/httputil.ReverseProxy (oauth2-proxy, prom-label-proxy, ...)
//     can cut the answer of: its HTTP/1 server closes the inbound request
//     body as soon as the response starts flowing, while its Transport
//     still reads that body once more after Content-Length bytes to check
//     it is not longer; that read fails ("http: invalid Read on closed
//     Body"), the Transport tears down the upstream connection mid-response
//     and the client gets "unexpected EOF" (golang/go#40747, #15527; the
//     proxy logs "read error during body copy: use of closed network
//     connection"). A GET has no body, so there is nothing to race.
//   - A request that failed in transport (no HTTP status to judge: a
//     reset, a cut response) is sent once more, logged through logf,
//     unless ctx is done: the queries only read, and a long query still
//     POSTed can meet the race above.
func NewClient(c api.Client, logf func(format string, args ...any)) api.Client {
	return &queryClient{Client: c, logf: logf}
}

type queryClient struct {
	api.Client
	logf func(format string, args ...any)
}

func (c *queryClient) Do(ctx context.Context, req *http.Request) (*http.Response, []byte, error) {
	req = asGet(req)
	resp, body, err := c.Client.Do(ctx, req)
	if err == nil || ctx.Err() != nil {
		return resp, body, err
	}
	again, rerr := rewind(req)
	if rerr != nil {
		return resp, body, err
	}
	u := *req.URL
	u.RawQuery = "" // the query is long; the path says which API
	c.logf("%s %s: %v; sending it once more", req.Method, u.Redacted(), err)
	return c.Client.Do(ctx, again)
}

// asGet turns a POSTed query form into a GET when the URL fits.
func asGet(req *http.Request) *http.Request {
	if req.Method != http.MethodPost || req.GetBody == nil || req.URL.RawQuery != "" ||
		req.Header.Get("Content-Type") != "application/x-www-form-urlencoded" ||
		(!strings.HasSuffix(req.URL.Path, "/api/v1/query") && !strings.HasSuffix(req.URL.Path, "/api/v1/query_range")) {
		return req
	}
	if req.ContentLength < 0 || req.ContentLength > MaxGetURL {
		return req
	}
	b, err := req.GetBody()
	if err != nil {
		return req
	}
	form, err := io.ReadAll(b)
	_ = b.Close()
	if err != nil {
		return req
	}
	u := *req.URL
	u.RawQuery = string(form)
	if len(u.String()) > MaxGetURL {
		return req
	}
	get, err := http.NewRequestWithContext(req.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		return req
	}
	get.Header = req.Header.Clone()
	get.Header.Del("Content-Type")
	return get
}

// rewind returns a fresh copy of req to send again.
func rewind(req *http.Request) (*http.Request, error) {
	again := req.Clone(req.Context())
	if req.Body == nil || req.Body == http.NoBody {
		return again, nil
	}
	if req.GetBody == nil {
		return nil, fmt.Errorf("%s %s: the body cannot be sent again", req.Method, req.URL.Redacted())
	}
	b, err := req.GetBody()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Redacted(), err)
	}
	again.Body = b
	return again, nil
}
