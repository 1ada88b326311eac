package admission

import (
	"regexp"
	"slices"
	"strings"
)

// Fields a matchCondition may test that the analyser reads.
const (
	FieldNamespace = "request.namespace"
	FieldGroup     = "request.resource.group"
	FieldResource  = "request.resource.resource"
	FieldKind      = "request.kind.kind"
	FieldUsername  = "request.userInfo.username"
	fieldGroups    = "request.userInfo.groups"
)

// maxConditionBytes bounds the text the analyser reads of one expression:
// the API server bounds CEL by cost, not length, and a longer expression
// is unanalysed rather than scanned.
const maxConditionBytes = 4096

// Conditions is what the audit knows of a webhook's matchConditions (CEL,
// all of which must be true for the API server to call the webhook). The
// analyser reads the forms webhook authors use to exclude namespaces,
// kinds and users, as conjunctions (&&) of:
//
//	request.namespace != 'x'            'x' != request.namespace
//	!(request.namespace in ['a', 'b'])  !(request.namespace == 'x')
//	request.namespace == 'x'            request.namespace in ['a', 'b']
//	!('system:nodes' in request.userInfo.groups)
//	'system:masters' in request.userInfo.groups
//	!(request.resource.group == 'coordination.k8s.io' && request.resource.resource == 'leases')
//
// on request.namespace, request.resource.group, request.resource.resource,
// request.kind.kind and request.userInfo.username, with ' or " quotes. Any
// other expression is unanalysed: Unanalysed names it, and the audit does
// not guess what it selects.
type Conditions struct {
	Unanalysed []string            // names of the conditions not read
	exclude    [][]term            // each: call excluded when all its comparisons hold
	include    map[string][]string // per field, the values allowed (every inclusion must hold)
}

// Call is what conditions are evaluated against; "" is a value the
// question leaves open (any resource of a wildcard rule, any user), which
// an exclusion of particular values does not rule out.
type Call struct {
	Namespace, Group, Resource, Kind, Username string
	UserGroups                                 []string
}

// Conditions reads the webhook's matchConditions.
func (w Webhook) Conditions() Conditions {
	var c Conditions
	for _, mc := range w.MatchConditions {
		if !c.read(mc.Expression) {
			c.Unanalysed = append(c.Unanalysed, mc.Name)
		}
	}
	return c
}

// Analysed reports whether every condition was read.
func (c Conditions) Analysed() bool { return len(c.Unanalysed) == 0 }

// Admits reports whether the analysed conditions can all be true for call.
// An unanalysed condition is not evaluated: the caller asks Analysed first.
func (c Conditions) Admits(call Call) bool {
	value := map[string]string{FieldNamespace: call.Namespace, FieldGroup: call.Group,
		FieldResource: call.Resource, FieldKind: call.Kind, FieldUsername: call.Username}
	holds := func(t term) bool { // the comparison is known to be true for call
		if t.field == fieldGroups {
			return slices.ContainsFunc(t.values, func(g string) bool { return slices.Contains(call.UserGroups, g) })
		}
		v := value[t.field]
		return v != "" && slices.Contains(t.values, v)
	}
	for _, combo := range c.exclude {
		if !slices.ContainsFunc(combo, func(t term) bool { return !holds(t) }) {
			return false
		}
	}
	for f, vs := range c.include {
		if len(vs) == 0 { // inclusions that exclude each other: never true
			return false
		}
		if f == fieldGroups {
			if !slices.ContainsFunc(vs, func(g string) bool { return slices.Contains(call.UserGroups, g) }) && call.UserGroups != nil {
				return false
			}
			continue
		}
		if v := value[f]; v != "" && !slices.Contains(vs, v) {
			return false
		}
	}
	return true
}

// Narrows reports whether the analysed conditions rule out some value of
// field f: an exclusion naming f, or an inclusion of f.
func (c Conditions) Narrows(f string) bool {
	for _, combo := range c.exclude {
		if slices.ContainsFunc(combo, func(t term) bool { return t.field == f }) {
			return true
		}
	}
	return c.include[f] != nil
}

var (
	quoted    = `(?:'[^'\\]*'|"[^"\\]*")`
	field     = `request\.(?:namespace|resource\.group|resource\.resource|kind\.kind|userInfo\.username)`
	list      = `\[\s*(?:` + quoted + `(?:\s*,\s*` + quoted + `)*\s*,?)?\s*\]`
	reCompare = regexp.MustCompile(`^(` + field + `)\s*(==|!=)\s*(` + quoted + `)$`)
	reCompRev = regexp.MustCompile(`^(` + quoted + `)\s*(==|!=)\s*(` + field + `)$`)
	reIn      = regexp.MustCompile(`^(` + field + `)\s+in\s+(` + list + `)$`)
	reGroupIn = regexp.MustCompile(`^(` + quoted + `)\s+in\s+request\.userInfo\.groups$`)
	reQuoted  = regexp.MustCompile(quoted)
)

// term is one comparison: field in values (negate: not in).
type term struct {
	field  string
	values []string
	negate bool
}

// parseTerm reads one comparison, with any leading negations.
func parseTerm(p string) (term, bool) {
	negate := false
	p = unparen(strings.TrimSpace(p))
	for strings.HasPrefix(p, "!") {
		negate = !negate
		p = unparen(strings.TrimSpace(p[1:]))
	}
	var t term
	switch {
	case reCompare.MatchString(p):
		m := reCompare.FindStringSubmatch(p)
		t = term{field: m[1], values: []string{unquote(m[3])}, negate: m[2] == "!="}
	case reCompRev.MatchString(p):
		m := reCompRev.FindStringSubmatch(p)
		t = term{field: m[3], values: []string{unquote(m[1])}, negate: m[2] == "!="}
	case reIn.MatchString(p):
		m := reIn.FindStringSubmatch(p)
		t = term{field: m[1], values: unquoteAll(m[2])}
	case reGroupIn.MatchString(p):
		m := reGroupIn.FindStringSubmatch(p)
		t = term{field: fieldGroups, values: []string{unquote(m[1])}}
	default:
		return term{}, false
	}
	if negate {
		t.negate = !t.negate
	}
	return t, true
}

// read adds one expression's conjuncts; false if some is not of a known
// form (then nothing of it is kept). A conjunct is a comparison, or the
// negation of a conjunction of positive comparisons, `!(group == "g" &&
// resource == "r")`: the Kubernetes documentation's way to exclude one
// resource of one group.
func (c *Conditions) read(expr string) bool {
	if len(expr) > maxConditionBytes {
		return false
	}
	parts, ok := conjuncts(expr)
	if !ok {
		return false
	}
	var excl [][]term
	var incl []term
	for _, p := range parts {
		if t, ok := parseTerm(p); ok {
			if t.negate {
				t.negate = false
				excl = append(excl, []term{t})
			} else {
				incl = append(incl, t)
			}
			continue
		}
		inner, ok := strings.CutPrefix(strings.TrimSpace(p), "!")
		if !ok {
			return false
		}
		sub, ok := conjuncts(inner)
		if !ok || len(sub) < 2 {
			return false
		}
		combo := make([]term, 0, len(sub))
		for _, q := range sub {
			t, ok := parseTerm(q)
			if !ok || t.negate {
				return false
			}
			combo = append(combo, t)
		}
		excl = append(excl, combo)
	}
	c.exclude = append(c.exclude, excl...)
	for _, t := range incl {
		if c.include == nil {
			c.include = map[string][]string{}
		}
		prev, ok := c.include[t.field]
		switch {
		case ok && t.field == fieldGroups: // each group named must be held: any one is kept as the test
			t.values = append(prev, t.values...)
		case ok: // both inclusions hold: their intersection
			t.values = slices.DeleteFunc(t.values, func(v string) bool { return !slices.Contains(prev, v) })
		}
		c.include[t.field] = t.values
	}
	return true
}

// conjuncts splits expr at its top-level && (outside quotes, parentheses
// and brackets), after removing parentheses around the whole. A top-level
// || or an unbalanced expression is not a conjunction: false.
func conjuncts(expr string) ([]string, bool) {
	expr = unparen(strings.TrimSpace(expr))
	var parts []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(expr); i++ {
		ch := expr[i]
		switch {
		case quote != 0:
			if ch == '\\' {
				return nil, false
			}
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '(' || ch == '[':
			depth++
		case ch == ')' || ch == ']':
			depth--
			if depth < 0 {
				return nil, false
			}
		case depth == 0 && strings.HasPrefix(expr[i:], "||"):
			return nil, false
		case depth == 0 && strings.HasPrefix(expr[i:], "&&"):
			parts = append(parts, unparen(strings.TrimSpace(expr[start:i])))
			start = i + 2
			i++
		}
	}
	if depth != 0 || quote != 0 {
		return nil, false
	}
	parts = append(parts, unparen(strings.TrimSpace(expr[start:])))
	for _, p := range parts {
		if p == "" {
			return nil, false
		}
	}
	return parts, true
}

// unparen removes parentheses that enclose all of s.
func unparen(s string) string {
	for len(s) >= 2 && s[0] == '(' && s[len(s)-1] == ')' && closes(s) {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	return s
}

// closes reports whether s's first parenthesis closes at its last byte.
func closes(s string) bool {
	depth := 0
	var quote byte
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '(':
			depth++
		case ch == ')':
			depth--
			if depth == 0 {
				return i == len(s)-1
			}
		}
	}
	return false
}

func unquote(q string) string { return q[1 : len(q)-1] }

func unquoteAll(l string) []string {
	qs := reQuoted.FindAllString(l, -1)
	out := make([]string, 0, len(qs))
	for _, q := range qs {
		out = append(out, unquote(q))
	}
	return out
}
