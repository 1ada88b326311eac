package main

import (
	"runtime/debug"
	"testing"
)

func TestVersionFallsBackToTheBuildInfo(t *testing.T) {
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "-trimpath", Value: "true"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0568b86c1f4e"},
			{Key: "vcs.time", Value: "2026-05-09T10:00:00Z"},
			{Key: "vcs.modified", Value: modified},
		}
	}
	for _, tc := range []struct {
		name string
		ld   buildStamp
		info debug.BuildInfo
		want buildStamp
	}{{
		name: "plain go build of a clean checkout: a pseudo-version from git",
		info: debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260509100000-0568b86c1f4e"}, Settings: vcs("false")},
		want: buildStamp{"v0.0.0-20260509100000-0568b86c1f4e", "0568b86c1f4e", "2026-05-09T10:00:00Z"},
	}, {
		name: "a modified tree",
		info: debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260509100000-0568b86c1f4e+dirty"}, Settings: vcs("true")},
		want: buildStamp{"v0.0.0-20260509100000-0568b86c1f4e+dirty", "0568b86c1f4e-modified", "2026-05-09T10:00:00Z"},
	}, {
		name: "go install module@v0.1.0: the module's version, no VCS",
		info: debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}},
		want: buildStamp{version: "v0.1.0"},
	}, {
		name: "-buildvcs=false (this project's machines' GOFLAGS)",
		info: debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
		want: buildStamp{version: "(devel)"},
	}, {
		name: "no main version at all",
		want: buildStamp{version: "(devel)"},
	}, {
		name: "-ldflags win, field by field",
		ld:   buildStamp{version: "0.1.0", revision: "abc"},
		info: debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260509100000-0568b86c1f4e"}, Settings: vcs("false")},
		want: buildStamp{"0.1.0", "abc", "2026-05-09T10:00:00Z"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fromBuildInfo(tc.ld, &tc.info); got != tc.want {
				t.Errorf("fromBuildInfo = %+v, want %+v", got, tc.want)
			}
		})
	}
}
