package timeline

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// builtinKind is a workload kind whose rollouts the rollouts collector
// tracks, with the names kubectl knows it by (kubectl api-resources on
// v1.37: NAME, SHORTNAMES, APIVERSION apps/v1, KIND).
type builtinKind struct {
	kind, plural, short, group string
}

var builtinKinds = []builtinKind{
	{"Deployment", "deployments", "deploy", "apps"},
	{"StatefulSet", "statefulsets", "sts", "apps"},
	{"DaemonSet", "daemonsets", "ds", "apps"},
}

// UnknownKindError is the error of ResolveKind: Kind is not a spelling of a
// tracked kind. Its message lists the accepted forms.
type UnknownKindError struct {
	Kind     string
	Accepted []string // one line per kind: its canonical name and its other spellings
}

func (e *UnknownKindError) Error() string {
	return fmt.Sprintf("unknown kind %q: accepted %s", e.Kind, strings.Join(e.Accepted, "; "))
}

// ResolveKind turns a kind as a person writes it into the canonical kind of
// the timeline store (the tracker's kind label): "Deployment", or
// "Kind.group" for a custom resource ("Certificate.cert-manager.io").
//
// Built-in workloads are accepted as kubectl accepts them on the command
// line, case-insensitively: Deployment, deployment, deploy, deployments,
// deployments.apps, deployment.apps (likewise StatefulSet/sts and
// DaemonSet/ds).
//
// custom lists the custom resources that may be tracked, each either as
// configured, plural.group ("certificates.cert-manager.io", the
// resources[] entries of --config.file), or as a canonical Kind.group
// ("Certificate.cert-manager.io", a kind seen in the store). A custom
// resource is accepted as Kind.group when its group is one of custom's; and
// as kind.group (any case) or plural.group when its Kind.group is in custom:
// the Kind of a configured plural is only known from its CRD, so the plural
// form needs the canonical kind (the plural is guessed from the Kind as
// apimachinery's meta.UnsafeGuessKindToResource does: certificate ->
// certificates, policy -> policies, ingress -> ingresses).
//
// The error is an *UnknownKindError listing the accepted forms.
func ResolveKind(s string, custom []string) (string, error) {
	s = strings.TrimSpace(s)
	lower := strings.ToLower(s)
	for _, b := range builtinKinds {
		for _, form := range []string{strings.ToLower(b.kind), b.plural, b.short} {
			if lower == form || lower == form+"."+b.group {
				return b.kind, nil
			}
		}
	}
	name, group, dotted := strings.Cut(s, ".")
	group = strings.ToLower(group)
	if dotted && name != "" && group != "" {
		var groupKnown bool
		for _, c := range custom {
			cname, cgroup, ok := strings.Cut(c, ".")
			if !ok || !strings.EqualFold(cgroup, group) {
				continue
			}
			groupKnown = true
			if !isKind(cname) {
				continue // a configured plural: it names no Kind
			}
			if strings.EqualFold(cname, name) || strings.ToLower(name) == guessPlural(cname) {
				return cname + "." + strings.ToLower(cgroup), nil
			}
		}
		if groupKnown && isKind(name) {
			return name + "." + group, nil
		}
	}
	return "", &UnknownKindError{Kind: s, Accepted: acceptedKinds(custom)}
}

// isKind: a Kind is CamelCase (apimachinery's convention); a resource name
// (plural, singular, short name) is lower case.
func isKind(s string) bool {
	r := []rune(s)
	return len(r) > 0 && unicode.IsUpper(r[0])
}

// guessPlural is meta.UnsafeGuessKindToResource's plural of a Kind
// (k8s.io/apimachinery/pkg/api/meta/restmapper.go), the name a CRD's
// plural almost always has.
func guessPlural(kind string) string {
	k := strings.ToLower(kind)
	switch {
	case k == "":
		return k
	case strings.HasSuffix(k, "s"):
		return k + "es"
	case strings.HasSuffix(k, "y"):
		return k[:len(k)-1] + "ies"
	}
	return k + "s"
}

// acceptedKinds lists the accepted forms, for errors.
func acceptedKinds(custom []string) []string {
	var out []string
	for _, b := range builtinKinds {
		out = append(out, fmt.Sprintf("%s (%s, %s, %s, %s.%s)", b.kind, strings.ToLower(b.kind), b.short, b.plural, b.plural, b.group))
	}
	var groups []string
	for _, c := range custom {
		if _, g, ok := strings.Cut(c, "."); ok && !slices.Contains(groups, strings.ToLower(g)) {
			groups = append(groups, strings.ToLower(g))
		}
	}
	slices.Sort(groups)
	for _, g := range groups {
		var examples []string
		for _, c := range custom {
			if name, cg, ok := strings.Cut(c, "."); ok && strings.EqualFold(cg, g) && isKind(name) {
				examples = append(examples, name+"."+g)
			}
		}
		slices.Sort(examples)
		examples = slices.Compact(examples)
		line := "Kind." + g
		if len(examples) > 0 {
			line += " (" + strings.Join(examples, ", ") + ")"
		}
		out = append(out, line)
	}
	if len(groups) == 0 {
		out = append(out, "Kind.group of a custom resource listed in resources of --config.file (none is)")
	}
	return out
}
