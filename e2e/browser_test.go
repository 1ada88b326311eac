package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// openInBrowser opens url in Debian's headless Chromium through chromedp,
// evaluates js into a T and returns it with every problem seen: a
// JavaScript dialog (an injected alert), an exception, a console or log
// error (a CSP violation is one), a request for a URL allowed refuses.
// Without chromium the test fails: make test installs it (or stops with
// the command to run), a developer running go test runs apt-get install
// chromium.
func openInBrowser[T any](ctx context.Context, t *testing.T, url, js string, allowed func(string) bool, opts ...chromedp.ExecAllocatorOption) (T, []string) {
	t.Helper()
	var out T
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found (%v): the browser tests need Debian's chromium (apt-get install -y chromium)", err)
	}
	opts = append(append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin),
		// Root in CI containers: Chromium refuses to run sandboxed as root.
		chromedp.NoSandbox, chromedp.DisableGPU), opts...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()

	var mu sync.Mutex
	var problems []string
	// Listen attaches to the tab (starting the browser); the domains are
	// enabled before the navigation, so that nothing the page does is
	// missed.
	if err := chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			problems = append(problems, fmt.Sprintf("Page.javascriptDialogOpening: %s %q", ev.Type, ev.Message))
			// Dismiss it, or the page hangs.
			go func() {
				_, _ = chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			}()
		case *runtime.EventExceptionThrown:
			problems = append(problems, "Runtime.exceptionThrown: "+ev.ExceptionDetails.Text)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				problems = append(problems, fmt.Sprintf("console error: %d arguments", len(ev.Args)))
			}
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				problems = append(problems, "Log.entryAdded error: "+ev.Entry.Text+" "+ev.Entry.URL)
			}
		case *network.EventRequestWillBeSent:
			if !allowed(ev.Request.URL) {
				problems = append(problems, "network request: "+ev.Request.URL)
			}
		}
	}); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	for _, enable := range []func() error{
		func() error { _, err := chromedp.Call(bctx, network.Enable, network.EnableParams{}); return err },
		func() error { _, err := chromedp.Call(bctx, log.Enable, cdp.Empty{}); return err },
		func() error { _, err := chromedp.Call(bctx, runtime.Enable, cdp.Empty{}); return err },
		func() error { _, err := chromedp.Call(bctx, page.Enable, page.EnableParams{}); return err },
	} {
		if err := enable(); err != nil {
			t.Fatalf("chromium: enabling a domain: %v", err)
		}
	}
	start := time.Now()
	if err := chromedp.Do(bctx, chromedp.Navigate(url), chromedp.WaitReady("body")); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	out, err = chromedp.Run(bctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	// Late events (a blocked inline script's violation, a failed fetch)
	// arrive asynchronously: a round trip to the browser lets them in.
	title, err := chromedp.Run(bctx, chromedp.Title())
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	t.Logf("chromium rendered %s (%q) in %v", url, title, time.Since(start).Round(time.Millisecond))
	mu.Lock()
	defer mu.Unlock()
	return out, slices.Clone(problems)
}
