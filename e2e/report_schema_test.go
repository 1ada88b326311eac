package e2e

import (
	"bytes"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// validateReportJSON validates a `report --format json` document against
// the committed docs/report.schema.json, formats (date-time) asserted.
func validateReportJSON(t *testing.T, doc []byte) {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	sch, err := c.Compile("../docs/report.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("the report does not validate against docs/report.schema.json: %v", err)
	}
}
