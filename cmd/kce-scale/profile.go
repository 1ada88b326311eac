package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// profiler takes one process's CPU profiles back to back while the churn
// runs, then a heap profile after a forced GC, into a directory of
// SCALE_PROFILES. pprof merges the CPU profiles it is given:
// `go tool pprof -top <binary> dir/churn-cpu-*.pprof`.
type profiler struct {
	dir, base  string // base: http://host:port serving /debug/pprof/
	period     time.Duration
	stop, done chan struct{}
	files      []string
	err        error
}

func startProfiler(ctx context.Context, dir, base string, period time.Duration) (*profiler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p := &profiler{dir: dir, base: base, period: period, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			default:
			}
			name := filepath.Join(dir, fmt.Sprintf("churn-cpu-%02d.pprof", i))
			if err := fetchTo(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, int(period.Seconds())), name); err != nil {
				p.err = err
				return
			}
			p.files = append(p.files, name)
		}
	}()
	return p, nil
}

// finish waits for the profile in flight (at most one period), then takes
// a heap profile after a forced GC.
func (p *profiler) finish(ctx context.Context) ([]string, error) {
	close(p.stop)
	<-p.done
	if p.err != nil {
		return p.files, p.err
	}
	heap := filepath.Join(p.dir, "heap.pprof")
	if err := fetchTo(ctx, p.base+"/debug/pprof/heap?gc=1", heap); err != nil {
		return p.files, err
	}
	return append(p.files, heap), nil
}

func fetchTo(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
