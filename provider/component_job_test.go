package provider

import (
	"encoding/json"
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The old class's job member survives as an output: a reference to the Rollout child, so that
// `dependsOn: [upgrade.job]` waits for the rollout as it waited for the Job.
func TestComponentJobIsAReferenceToTheRollout(t *testing.T) {
	s, regs := constructServer(t, nil)
	resp, err := s.Construct(p.ConstructRequest{Urn: componentURN, Inputs: componentInputs(map[string]property.Value{
		"versionHash": property.New("v1"),
		"kubeconfig":  property.New("/home/me/.kube/config"),
	})})
	require.NoError(t, err)
	regs.get(t, rolloutToken)

	job, ok := resp.State.GetOk("job")
	require.True(t, ok, "the component has a job output; state: %v", resp.State)
	require.True(t, job.IsResourceReference(), "job is a resource reference, got %v", job)
	ref := job.AsResourceReference()
	assert.Equal(t, rolloutToken, string(ref.URN.Type()), "job refers to the Rollout")
	assert.Equal(t, "etcd", ref.URN.Name())
	id, hasID := ref.IDString()
	assert.True(t, hasID)
	assert.Equal(t, "etcd-id", id, "the reference carries the Rollout's ID: it resolves once the rollout is done")
}

// In the schema the output is typed as the package's Rollout resource and marked deprecated, so the SDKs
// generate Output<Rollout> with a deprecation note.
func TestSchemaJobOutputIsADeprecatedRolloutReference(t *testing.T) {
	s, _ := constructServer(t, nil)
	resp, err := s.GetSchema(p.GetSchemaRequest{})
	require.NoError(t, err)
	var spec struct {
		Resources map[string]struct {
			Properties map[string]struct {
				Ref                string `json:"$ref"`
				DeprecationMessage string `json:"deprecationMessage"`
			} `json:"properties"`
			Required []string `json:"required"`
		} `json:"resources"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp.Schema), &spec))
	comp, ok := spec.Resources[Name+":index:EtcdRollingUpgrade"]
	require.True(t, ok)
	job, ok := comp.Properties["job"]
	require.True(t, ok, "job is an output of the component")
	assert.Equal(t, "#/resources/"+rolloutToken, job.Ref)
	assert.Contains(t, job.DeprecationMessage, "dependsOn: [upgrade.job]")
	assert.Contains(t, comp.Required, "job", "always set")
}
