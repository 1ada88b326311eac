package sandbox

import (
	"embed"
	"fmt"
	"path"
	"strings"
)

// stageFiles holds kwok's stock Stage documents (Apache-2.0, see
// stages/README.md). kwok exits with "no stages found" when started without
// any, so the sandbox always writes a set of them into kwok's --config file.
//
//go:embed stages/node stages/pod
var stageFiles embed.FS

// Stages selects which of kwok's stock pod lifecycles the fake nodes play.
// Every set also contains the node stages (node/fast initialises a node to
// Ready, node/heartbeat refreshes its conditions every 20-25 s).
type Stages int

const (
	// StagesFast makes pods Ready in one step as soon as they are bound.
	StagesFast Stages = iota
	// StagesGeneral plays pod-create (Initialized) then pod-ready (Ready) with
	// per-pod delays from annotations such as
	// pod-create.stage.kwok.x-k8s.io/delay and .../jitter-delay. kwok treats the
	// jitter as an upper bound: set it equal to the delay for an exact delay.
	// Without annotations each stage waits a random 1-5 s.
	StagesGeneral
	// StagesChaos is StagesGeneral plus the pod/chaos stages, which fail the
	// containers of pods labelled
	// pod-container-running-failed.stage.kwok.x-k8s.io=true (or the init
	// containers, with pod-init-container-running-failed...).
	StagesChaos
)

func (st Stages) String() string {
	switch st {
	case StagesFast:
		return "fast"
	case StagesGeneral:
		return "general"
	case StagesChaos:
		return "chaos"
	}
	return fmt.Sprintf("Stages(%d)", int(st))
}

// dirs lists the embedded directories that make up the set, in order.
func (st Stages) dirs() ([]string, error) {
	nodes := []string{"node/fast", "node/heartbeat"}
	switch st {
	case StagesFast:
		return append(nodes, "pod/fast"), nil
	case StagesGeneral:
		return append(nodes, "pod/general"), nil
	case StagesChaos:
		return append(nodes, "pod/general", "pod/chaos"), nil
	}
	return nil, fmt.Errorf("unknown stage set %v", st)
}

// stageConfig returns kwok's --config content: every Stage document of the
// set followed by the caller's extra documents, separated by "---".
func stageConfig(st Stages, extra []string) (string, error) {
	dirs, err := st.dirs()
	if err != nil {
		return "", err
	}
	var docs []string
	for _, dir := range dirs {
		entries, err := stageFiles.ReadDir(path.Join("stages", dir))
		if err != nil {
			return "", fmt.Errorf("reading embedded stages %s: %w", dir, err)
		}
		for _, e := range entries {
			b, err := stageFiles.ReadFile(path.Join("stages", dir, e.Name()))
			if err != nil {
				return "", fmt.Errorf("reading embedded stage %s/%s: %w", dir, e.Name(), err)
			}
			docs = append(docs, string(b))
		}
	}
	docs = append(docs, extra...)
	var b strings.Builder
	for i, d := range docs {
		if i > 0 {
			b.WriteString("---\n")
		}
		// A caller's document may carry its own leading "---"; a doubled
		// separator would make an empty document.
		d = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(d), "---"))
		b.WriteString(d)
		b.WriteString("\n")
	}
	return b.String(), nil
}
