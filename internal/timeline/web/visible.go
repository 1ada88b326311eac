package web

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Visible renders text from the cluster (field managers, Event notes,
// condition messages: any string a client wrote) for a terminal: every rune
// a terminal could interpret or that shows nothing (C0 and C1 controls with
// ESC and CSI among them, DEL, newlines, bidirectional overrides,
// zero-width and other format runes, invalid UTF-8) is written as a Go
// escape (\x1b, \u202e, \n), and a backslash as \\ so that an escape in the
// output is never ambiguous with the same characters in the text. Printable
// text, markup such as <script> included, is text on a terminal and stays
// as it is.
func Visible(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case VisibleRune(r):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += size
	}
	return b.String()
}

// VisibleRune: the rune is printable (unicode.IsPrint: letters, marks,
// numbers, punctuation, symbols and the ASCII space), so a terminal shows it
// as itself.
func VisibleRune(r rune) bool { return unicode.IsPrint(r) }

func needsEscape(s string) bool {
	for _, r := range s {
		if r == '\\' || r == utf8.RuneError || !VisibleRune(r) {
			return true
		}
	}
	return false
}
