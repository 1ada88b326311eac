package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// panicking is a Selection whose episodes cannot be copied.
type panicking struct{ timeline.Selection }

func (panicking) Episode(int) timeline.Episode { panic("copying an episode") }

// done fails t unless f returns within a few seconds: a leaked or
// unreleased encoders token makes it wait for good.
func done(t *testing.T, what string, f func()) {
	t.Helper()
	ch := make(chan struct{})
	go func() { defer close(ch); f() }()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still waiting after 5 s (an encoders token leaked?)", what)
	}
}

// A panic while an episode is copied releases its encoders token: with
// every token leaked, no answer would ever be written again.
func TestWriteItemsReleasesEncoderOnPanic(t *testing.T) {
	sel := panicking{timeline.Literal(episodes())}
	for i := range cap(encoders) + 1 {
		done(t, fmt.Sprintf("answer %d, panicking", i), func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			writeItems(t.Context(), httptest.NewRecorder(), sel, "")
		})
	}
	done(t, "an answer after panics", func() { writeItems(t.Context(), httptest.NewRecorder(), timeline.Literal(episodes()), "") })
}

// holdEncoders takes every encoders token until the test ends, as answers
// busy with other clients would.
func holdEncoders(t *testing.T) {
	t.Helper()
	for range cap(encoders) {
		encoders <- struct{}{}
	}
	t.Cleanup(func() {
		for range cap(encoders) {
			<-encoders
		}
	})
}

// A client gone while its answer waits for an encoders token stops
// waiting, and nothing more is written for it: the API's and the page's.
func TestAnswersStopWaitingForEncoderWhenClientGone(t *testing.T) {
	holdEncoders(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rec := httptest.NewRecorder()
	done(t, "writeItems", func() { writeItems(ctx, rec, timeline.Literal(episodes()), "") })
	if body := rec.Body.String(); strings.HasSuffix(body, "}\n") {
		t.Errorf("a whole answer (%d bytes) for a client gone", len(body))
	}
	h := newHandler(Options{Source: &fakeSource{eps: episodes()}, Now: func() time.Time { return t0 }})
	for _, path := range []string{PagePath + "/deploy/shop/web", PagePath, PagePath + "?uid=uid-web", APIPath + "/deploy/shop/web", APIPath} {
		mux := http.NewServeMux()
		mux.HandleFunc("GET "+APIPath, h.list)
		mux.HandleFunc("GET "+APIPath+"/{kind}/{namespace}/{name}", h.object)
		mux.HandleFunc("GET "+PagePath, h.listPage)
		mux.HandleFunc("GET "+PagePath+"/{kind}/{namespace}/{name}", h.objectPage)
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
		done(t, path, func() { mux.ServeHTTP(rec, req) })
		if body := rec.Body.String(); strings.Contains(body, "</html>") || strings.HasSuffix(body, "}\n") {
			t.Errorf("%s: a whole answer (%d bytes) for a client gone", path, len(body))
		}
	}
}
