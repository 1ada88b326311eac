package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// cgroupV2 is a provider over a fake cgroup v2 memory.max file, read as
// the kernel writes it: a number of bytes, or "max" for no limit.
func cgroupV2(t *testing.T, content string) memlimit.Provider {
	t.Helper()
	path := filepath.Join(t.TempDir(), "memory.max")
	if err := os.WriteFile(path, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return func() (uint64, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, err
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, memlimit.ErrNoLimit
		}
		return strconv.ParseUint(s, 10, 64)
	}
}

// memoryLimitTest runs f and puts the process' memory limit back.
func memoryLimitTest(t *testing.T) *bytes.Buffer {
	t.Helper()
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	t.Setenv("GOMEMLIMIT", "")
	os.Unsetenv("GOMEMLIMIT")
	t.Setenv("AUTOMEMLIMIT", "")
	os.Unsetenv("AUTOMEMLIMIT")
	return &bytes.Buffer{}
}

func textLogger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
}

// A 512 MiB container at the default ratio: the runtime's limit is
// 0.9 × 536870912 = 483183820 bytes (rounded down), and the start log says
// so with both numbers.
func TestSetMemoryLimitFromCgroupV2(t *testing.T) {
	for _, tc := range []struct {
		memoryMax string
		ratio     float64
		want      int64
	}{
		{"536870912", 0.9, 483183820},
		{"1073741824", 0.5, 536870912},
		{"268435456", 1, 268435456},
	} {
		t.Run(fmt.Sprintf("%s×%v", tc.memoryMax, tc.ratio), func(t *testing.T) {
			buf := memoryLimitTest(t)
			got := setMemoryLimit(tc.ratio, cgroupV2(t, tc.memoryMax), textLogger(buf))
			if got != tc.want {
				t.Errorf("limit = %d, want %d", got, tc.want)
			}
			if inForce := debug.SetMemoryLimit(-1); inForce != tc.want {
				t.Errorf("runtime limit = %d, want %d", inForce, tc.want)
			}
			want := fmt.Sprintf("level=INFO msg=\"Go memory limit set from the cgroup memory limit\" limit_bytes=%d cgroup_limit_bytes=%s ratio=%v\n", tc.want, tc.memoryMax, tc.ratio)
			if buf.String() != want {
				t.Errorf("log:\n%s\nwant:\n%s", buf, want)
			}
		})
	}
}

// Each reason for setting nothing leaves the runtime's limit alone and
// says why in one line.
func TestSetMemoryLimitNone(t *testing.T) {
	failing := func() (uint64, error) { return 0, errors.New("process is not in cgroup") }
	for _, tc := range []struct {
		name     string
		ratio    float64
		env      string
		provider func(*testing.T) memlimit.Provider
		want     string
	}{
		{"ratio 0", 0, "", func(t *testing.T) memlimit.Provider { return cgroupV2(t, "536870912") },
			"level=INFO msg=\"Go memory limit not set: --auto-gomemlimit.ratio is 0\"\n"},
		{"no cgroup limit", 0.9, "", func(t *testing.T) memlimit.Provider { return cgroupV2(t, "max") },
			"level=INFO msg=\"Go memory limit not set: the cgroup has no memory limit\"\n"},
		{"no cgroup", 0.9, "", func(*testing.T) memlimit.Provider { return failing },
			"level=INFO msg=\"Go memory limit not set: no cgroup memory limit found\" err=\"failed to set GOMEMLIMIT: process is not in cgroup\"\n"},
		// The runtime read GOMEMLIMIT when the process started; the test
		// process set it to 300 MiB before this case by hand.
		{"GOMEMLIMIT wins", 0.9, "300MiB", func(t *testing.T) memlimit.Provider { return cgroupV2(t, "536870912") },
			"level=INFO msg=\"Go memory limit from GOMEMLIMIT in the environment; --auto-gomemlimit.ratio ignored\" GOMEMLIMIT=300MiB limit_bytes=314572800\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := memoryLimitTest(t)
			before := int64(math.MaxInt64)
			if tc.env != "" {
				t.Setenv("GOMEMLIMIT", tc.env)
				before = 300 << 20 // what the runtime would have read from it
			}
			debug.SetMemoryLimit(before)
			got := setMemoryLimit(tc.ratio, tc.provider(t), textLogger(buf))
			if got != before || debug.SetMemoryLimit(-1) != before {
				t.Errorf("limit = %d (runtime %d), want it left at %d", got, debug.SetMemoryLimit(-1), before)
			}
			if buf.String() != tc.want {
				t.Errorf("log:\n%s\nwant:\n%s", buf, tc.want)
			}
		})
	}
}
