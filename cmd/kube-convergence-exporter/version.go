package main

import (
	"runtime/debug"

	"github.com/prometheus/common/version"
)

// A plain go build or go install has no -ldflags: fill what they would
// have stamped from the module build info, so that --version and
// kube_convergence_build_info never show an empty version. -ldflags win
// (make build, make release, the Dockerfile); docs/releasing.md has the
// precedence.
func init() {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	s := fromBuildInfo(buildStamp{version.Version, version.Revision, version.BuildDate}, info)
	version.Version, version.Revision, version.BuildDate = s.version, s.revision, s.date
}

// buildStamp is the part of prometheus/common/version that the build info
// can tell.
type buildStamp struct{ version, revision, date string }

// fromBuildInfo fills the empty fields of s: the version from the main
// module's (a tag, a pseudo-version from the VCS, or "(devel)"), the
// revision from vcs.revision (with -modified when vcs.modified, as
// prometheus/common does), the date from vcs.time (the commit's time:
// Go records no build time).
func fromBuildInfo(s buildStamp, info *debug.BuildInfo) buildStamp {
	settings := map[string]string{}
	for _, kv := range info.Settings {
		settings[kv.Key] = kv.Value
	}
	if s.version == "" {
		s.version = info.Main.Version
		if s.version == "" {
			s.version = "(devel)" // go run, go test: Main has no version
		}
	}
	if rev := settings["vcs.revision"]; s.revision == "" && rev != "" {
		if settings["vcs.modified"] == "true" {
			rev += "-modified"
		}
		s.revision = rev
	}
	if s.date == "" {
		s.date = settings["vcs.time"]
	}
	return s
}
