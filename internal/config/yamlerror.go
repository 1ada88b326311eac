package config

import (
	"bytes"
	"encoding/base64"
	"regexp"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// yamlLine is the line yaml.v3 puts before a message, when it does.
var yamlLine = regexp.MustCompile(`^line \d+: `)

// yaml.v3 (v3.0.1) names no line in three kinds of errors, which FuzzParse
// found ("found unexpected end of stream" for a lone `"`, "control
// characters are not allowed", "unknown anchor 'x' referenced"):
//
//   - its reader's, about the bytes (invalid UTF-8, a control
//     character): it decodes the input ahead of the scanner, so the line
//     it would give is the last token's, or none;
//   - its scanner's and parser's when both marks are on the first line:
//     decode.go parser.fail writes "line N" only for a line index other
//     than 0;
//   - its composer's and decoder's (an unknown anchor, an anchor that
//     contains itself, bad !!binary data, a value its explicit tag does not
//     fit, a merge of a scalar, a map or list as a map key), which carry
//     no position at all.
var readerProblems = []string{
	"invalid leading UTF-8 octet", "incomplete UTF-8 octet sequence", "invalid trailing UTF-8 octet",
	"invalid length of a UTF-8 sequence", "invalid Unicode character", "control characters are not allowed",
}

var (
	unknownAnchor  = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)
	selfAnchor     = regexp.MustCompile(`^anchor '(.*)' value contains itself$`)
	untypedValue   = regexp.MustCompile("^cannot decode (\\S+) `(.*)` as a (\\S+)$")
	decodeProblems = map[string]func(n *yaml.Node) bool{
		"document contains excessive aliasing": func(n *yaml.Node) bool { return n.Kind == yaml.AliasNode },
		"!!binary value contains invalid base64 data": func(n *yaml.Node) bool {
			if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!binary" {
				return false
			}
			_, err := base64.StdEncoding.DecodeString(n.Value)
			return err != nil
		},
		"map merge requires map or sequence of maps as the value": func(n *yaml.Node) bool {
			if n.Kind != yaml.MappingNode {
				return false
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].ShortTag() == "!!merge" && !mergeable(n.Content[i+1]) {
					return true
				}
			}
			return false
		},
	}
)

// mergeable: what a merge key (<<) takes, a map or a list of maps.
func mergeable(v *yaml.Node) bool {
	if v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	switch v.Kind {
	case yaml.MappingNode:
		return true
	case yaml.SequenceNode:
		for _, c := range v.Content {
			if c.Kind == yaml.AliasNode && c.Alias != nil {
				c = c.Alias
			}
			if c.Kind != yaml.MappingNode {
				return false
			}
		}
		return true
	}
	return false
}

// problemLine is the line of a yaml.v3 error message msg about doc: the
// one it names, else the one found for it; false when unknown. root is
// the document's node tree when the typed decode failed (the parse had
// succeeded), nil when the parse failed.
func problemLine(msg string, doc []byte, root *yaml.Node) (int, bool) {
	for _, p := range readerProblems {
		if strings.HasPrefix(yamlLine.ReplaceAllString(msg, ""), p) {
			return refusedLine(doc)
		}
	}
	if yamlLine.MatchString(msg) {
		return 0, false // named already
	}
	if m := unknownAnchor.FindStringSubmatch(msg); m != nil {
		return aliasLine(doc, m[1])
	}
	if root == nil {
		// The scanner's or the parser's: both marks on the first line.
		return 1, true
	}
	match := decodeProblems[msg]
	switch m := untypedValue.FindStringSubmatch(msg); {
	case m != nil:
		match = func(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Value == m[2] && n.ShortTag() == m[3] }
	case strings.HasPrefix(msg, "invalid map key: "):
		match = func(n *yaml.Node) bool {
			for i := 0; i < len(n.Content) && n.Kind == yaml.MappingNode; i += 2 {
				if k := n.Content[i]; k.Kind == yaml.MappingNode || k.Kind == yaml.SequenceNode {
					return true
				}
			}
			return false
		}
	}
	if m := selfAnchor.FindStringSubmatch(msg); m != nil {
		match = func(n *yaml.Node) bool { return n.Kind == yaml.AliasNode && n.Value == m[1] }
	}
	if match == nil {
		return 0, false
	}
	if n := findNode(root, match, map[*yaml.Node]bool{}); n != nil {
		return n.Line, true
	}
	return 0, false
}

// findNode is the first node under n that match accepts, depth first.
func findNode(n *yaml.Node, match func(*yaml.Node) bool, seen map[*yaml.Node]bool) *yaml.Node {
	if n == nil || seen[n] {
		return nil
	}
	seen[n] = true
	if match(n) {
		return n
	}
	for _, c := range n.Content {
		if found := findNode(c, match, seen); found != nil {
			return found
		}
	}
	return nil
}

// lineAt is the line of byte offset i of doc, counting line breaks as
// YAML does (CR LF, CR, LF, NEL, LS, PS).
func lineAt(doc []byte, i int) int {
	line := 1
	for j := 0; j < i && j < len(doc); j++ {
		switch {
		case doc[j] == '\r' && j+1 < len(doc) && doc[j+1] == '\n':
		case doc[j] == '\r', doc[j] == '\n':
			line++
		case bytes.HasPrefix(doc[j:], []byte("\u0085")), bytes.HasPrefix(doc[j:], []byte("\u2028")), bytes.HasPrefix(doc[j:], []byte("\u2029")):
			line++
		}
	}
	return line
}

// refusedLine is the line of the first byte of doc that yaml.v3's reader
// refuses: invalid UTF-8, or a character outside YAML's printable set
// (readerc.go). A document in UTF-16 (a BOM) is not searched.
func refusedLine(doc []byte) (int, bool) {
	if bytes.HasPrefix(doc, []byte{0xff, 0xfe}) || bytes.HasPrefix(doc, []byte{0xfe, 0xff}) {
		return 0, false
	}
	for i := 0; i < len(doc); {
		r, size := utf8.DecodeRune(doc[i:])
		if (r == utf8.RuneError && size <= 1) || !yamlPrintable(r) {
			return lineAt(doc, i), true
		}
		i += size
	}
	return 0, false
}

func yamlPrintable(r rune) bool {
	return r == 0x09 || r == 0x0a || r == 0x0d || (r >= 0x20 && r <= 0x7e) || r == 0x85 ||
		(r >= 0xa0 && r <= 0xd7ff) || (r >= 0xe000 && r <= 0xfffd) || (r >= 0x10000 && r <= 0x10ffff)
}

// aliasLine is the line of the first alias of anchor name (*name) in doc:
// *name followed by what ends an alias in yaml.v3's scanner
// (yaml_parser_scan_anchor: a blank, a line break, the end, or one of
// ?:,]}%@` — FuzzParse found "*a:b" left without a line).
func aliasLine(doc []byte, name string) (int, bool) {
	for i := 0; ; {
		j := bytes.Index(doc[i:], []byte("*"+name))
		if j < 0 {
			return 0, false
		}
		i += j
		end := i + 1 + len(name)
		if rest := doc[end:]; len(rest) == 0 || strings.IndexByte(" \t\r\n\x00?:,]}%@`", rest[0]) >= 0 ||
			bytes.HasPrefix(rest, []byte("\u0085")) || bytes.HasPrefix(rest, []byte("\u2028")) || bytes.HasPrefix(rest, []byte("\u2029")) {
			return lineAt(doc, i), true
		}
		i++
	}
}
