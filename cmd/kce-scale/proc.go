package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// userHZ is the unit of utime and stime in /proc/PID/stat: USER_HZ, which
// Linux fixes at 100 for user space on every architecture (times(2)).
const userHZ = 100

// cpuSeconds is a process's user plus system CPU time so far, from
// /proc/PID/stat (fields 14 and 15, counted after the parenthesised comm,
// which may contain spaces).
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat: no comm in %q", stat)
	}
	// After ") ": field 3 (state) is f[0], so field n is f[n-3].
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after comm, want at least 13", len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc stat: utime %q stime %q", f[11], f[12])
	}
	return float64(utime+stime) / userHZ, nil
}

// memory is VmRSS and VmHWM (peak RSS) of a process, in bytes.
type memory struct{ rss, hwm uint64 }

func readMemory(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	return parseStatusMemory(string(b))
}

func parseStatusMemory(status string) (memory, error) {
	var m memory
	var found int
	for _, l := range strings.Split(status, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || f[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return m, fmt.Errorf("/proc status: %q: %w", l, err)
		}
		switch f[0] {
		case "VmRSS:":
			m.rss, found = kb*1024, found+1
		case "VmHWM:":
			m.hwm, found = kb*1024, found+1
		}
	}
	if found != 2 {
		return m, fmt.Errorf("/proc status: VmRSS or VmHWM missing")
	}
	return m, nil
}

// sampler reads a process's VmRSS every second and keeps the largest.
type sampler struct {
	pid  int
	mu   sync.Mutex
	max  uint64
	n    int
	stop chan struct{}
	done chan struct{}
}

func startSampler(pid int) *sampler {
	s := &sampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			if m, err := readMemory(pid); err == nil {
				s.mu.Lock()
				s.max, s.n = max(s.max, m.rss), s.n+1
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// finish stops the sampler and returns the largest RSS seen and the number
// of samples.
func (s *sampler) finish() (uint64, int) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max, s.n
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
