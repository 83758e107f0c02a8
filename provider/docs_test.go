package provider

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docs/installation-configuration.md lists every input and output of EtcdRollingUpgrade in a table: a property
// the schema gains (or loses) must be added to (or dropped from) the page, so the reference cannot drift.
func TestTheConfigurationPageListsEveryProperty(t *testing.T) {
	raw, err := os.ReadFile("../schema.json")
	require.NoError(t, err)
	var schema struct {
		Resources map[string]struct {
			InputProperties map[string]json.RawMessage `json:"inputProperties"`
			Properties      map[string]json.RawMessage `json:"properties"`
		} `json:"resources"`
	}
	require.NoError(t, json.Unmarshal(raw, &schema))
	page, err := os.ReadFile("../docs/installation-configuration.md")
	require.NoError(t, err)
	listed := map[string]bool{}
	for _, line := range strings.Split(string(page), "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			name, _, _ = strings.Cut(name, "`")
			listed[name] = true
		}
	}
	component := schema.Resources[Name+":index:EtcdRollingUpgrade"]
	require.NotEmpty(t, component.InputProperties)
	inSchema := map[string]bool{}
	for _, props := range []map[string]json.RawMessage{component.InputProperties, component.Properties} {
		for name := range props {
			inSchema[name] = true
			assert.True(t, listed[name], "docs/installation-configuration.md does not list %q", name)
		}
	}
	for name := range listed {
		assert.True(t, inSchema[name], "docs/installation-configuration.md lists %q, which the schema does not have", name)
	}
}
