package report

import (
	"bytes"
	"fmt"
)

func renderHTML(w *bytes.Buffer, r *Report) error {
	return fmt.Errorf("report: html: not yet")
}
