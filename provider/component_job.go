package provider

import (
	"reflect"

	sch "github.com/pulumi/pulumi-go-provider/middleware/schema"
	pschema "github.com/pulumi/pulumi/pkg/v3/codegen/schema"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// The Job-based class had a public `job` member, and stacks wrote `dependsOn: [upgrade.job]`. The component
// keeps that name as an output holding a reference to its Rollout child, the resource that now does the work,
// so such code type-checks (the SDKs type it Output<Rollout>, which dependsOn accepts) and still waits for the
// rollout to finish.

// rolloutSchemaRef is the Rollout as the job output holds it. In the schema it stands for the Rollout
// resource: infer types a property whose element implements its schema.Resource as a reference to that
// resource's token ("#/resources/..."). At run time it is the registered Rollout itself (the embedded
// CustomResource), which the Go SDK marshals as a resource reference with the Rollout's URN and ID.
type rolloutSchemaRef struct{ pulumi.CustomResource }

func (rolloutSchemaRef) GetToken() (tokens.Type, error) { return rolloutToken, nil }

// GetSchema is never called for a reference: the Rollout's own schema comes from its infer resource.
func (rolloutSchemaRef) GetSchema(sch.RegisterDerivativeType) (pschema.ResourceSpec, error) {
	return pschema.ResourceSpec{}, nil
}

var _ sch.Resource = rolloutSchemaRef{}

// rolloutReference is an output whose value is the registered Rollout; the program's SDK rehydrates the
// resource reference into its own Rollout handle.
type rolloutReference struct{ *pulumi.OutputState }

func (rolloutReference) ElementType() reflect.Type { return reflect.TypeFor[rolloutSchemaRef]() }

func referenceTo(r pulumi.CustomResource) rolloutReference {
	return rolloutReference{pulumi.NewResourceOutput(rolloutSchemaRef{r}).OutputState}
}
