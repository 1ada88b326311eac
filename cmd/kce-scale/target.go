package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

// target is one measured process: the exporter or kube-state-metrics.
type target struct {
	name        string
	cmd         *exec.Cmd
	done        chan error
	metricsURL  string // its /metrics: latency and size
	memstatsURL string // where its go_memstats_* are
	heapGCURL   string // GET forces a GC (pprof heap?gc=1); "" if not served
	pprofBase   string // http://host:port serving /debug/pprof/; "" if none
	sampler     *sampler
	// scrapeMu keeps the periodic scrape off the measured series.
	scrapeMu sync.Mutex
}

func startTarget(name, bin string, args []string, logPath string) (*target, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(context.Background(), bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := sandbox.StartCmd(cmd); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	t := &target{name: name, cmd: cmd, done: make(chan error, 1)}
	go func() { t.done <- cmd.Wait(); _ = logFile.Close() }()
	return t, nil
}

func (t *target) pid() int { return t.cmd.Process.Pid }

// stop sends SIGTERM to the process by its pid, SIGKILL after 15 s.
func (t *target) stop() {
	if t == nil {
		return
	}
	_ = t.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-t.done:
		t.done <- err // exited keeps reading it
	case <-time.After(15 * time.Second):
		_ = t.cmd.Process.Kill()
		t.done <- <-t.done
	}
}

func (t *target) exited() error {
	select {
	case err := <-t.done:
		t.done <- err
		if err == nil {
			err = errors.New("exited")
		}
		return fmt.Errorf("%s: %w", t.name, err)
	default:
		return nil
	}
}

var httpClient = &http.Client{Timeout: 60 * time.Second}

// scrape GETs url as Prometheus does in the text format (gzip accepted),
// hands every line to visit (if not nil), and returns the uncompressed size
// and the time from the request to the last byte.
func scrape(ctx context.Context, url string, visit func(string)) (int, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	begin := time.Now()
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if visit == nil {
		n, err := io.Copy(io.Discard, resp.Body)
		return int(n), time.Since(begin), err
	}
	var n int
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		n += len(sc.Bytes()) + 1
		visit(sc.Text())
	}
	return n, time.Since(begin), sc.Err()
}

// sample is the value of a text-format sample line, and whether the line is
// one of family (exactly, or with labels) with every label pair in want.
func sample(line, family string, want ...string) (float64, bool) {
	if !strings.HasPrefix(line, family) {
		return 0, false
	}
	rest := line[len(family):]
	if rest == "" || (rest[0] != '{' && rest[0] != ' ') {
		return 0, false
	}
	for _, w := range want {
		if !strings.Contains(rest, w) {
			return 0, false
		}
	}
	i := strings.LastIndexByte(rest, ' ')
	v, err := strconv.ParseFloat(rest[i+1:], 64)
	return v, err == nil
}

// point is a target's memory at one moment of the run.
type point struct {
	mem       memory
	heapInuse float64
}

// measure forces a GC where the target serves one, then reads its RSS and
// go_memstats_heap_inuse_bytes.
func (t *target) measure(ctx context.Context) (point, error) {
	t.scrapeMu.Lock()
	defer t.scrapeMu.Unlock()
	if t.heapGCURL != "" {
		if _, _, err := scrape(ctx, t.heapGCURL, nil); err != nil {
			return point{}, fmt.Errorf("%s: forced GC: %w", t.name, err)
		}
	}
	var p point
	var found bool
	if _, _, err := scrape(ctx, t.memstatsURL, func(l string) {
		if v, ok := sample(l, "go_memstats_heap_inuse_bytes"); ok {
			p.heapInuse, found = v, true
		}
	}); err != nil {
		return p, fmt.Errorf("%s: %w", t.name, err)
	}
	if !found {
		return p, fmt.Errorf("%s: no go_memstats_heap_inuse_bytes at %s", t.name, t.memstatsURL)
	}
	m, err := readMemory(t.pid())
	if err != nil {
		return p, fmt.Errorf("%s: %w", t.name, err)
	}
	p.mem = m
	return p, nil
}

// series scrapes /metrics n times in a row and returns each duration, then
// once more (untimed) for its size and number of sample lines.
func (t *target) series(ctx context.Context, n int) (secs []float64, size, samples int, err error) {
	t.scrapeMu.Lock()
	defer t.scrapeMu.Unlock()
	for range n {
		_, d, err := scrape(ctx, t.metricsURL, nil)
		if err != nil {
			return secs, 0, 0, fmt.Errorf("%s: %w", t.name, err)
		}
		secs = append(secs, d.Seconds())
	}
	size, _, err = scrape(ctx, t.metricsURL, func(l string) {
		if l != "" && l[0] != '#' {
			samples++
		}
	})
	if err != nil {
		return secs, 0, 0, fmt.Errorf("%s: %w", t.name, err)
	}
	return secs, size, samples, nil
}
