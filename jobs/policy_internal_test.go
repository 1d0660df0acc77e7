package jobs

import (
	"slices"
	"testing"

	"github.com/promptkit/promptkit/pktype"
)

// errorKinds is the one table from the engine's failure kinds to the
// job's: each of the engine's kinds is in exactly one row, but
// provider_status, which its code decides (statusKind).
func TestErrorKindsCoverEngineKinds(t *testing.T) {
	t.Parallel()
	for _, f := range []pktype.ExecutionFailureKind{
		pktype.ExecutionFailureCanceled, pktype.ExecutionFailureDeadline, pktype.ExecutionFailureTransport,
		pktype.ExecutionFailureMalformed, pktype.ExecutionFailureCapacity, pktype.ExecutionFailureInvalidConfig,
		pktype.ExecutionFailureInvalidRequest, pktype.ExecutionFailurePromptNotFound, pktype.ExecutionFailureProfileNotFound,
		pktype.ExecutionFailurePromptRender, pktype.ExecutionFailureValidation, pktype.ExecutionFailureGeneration,
		pktype.ExecutionFailureOther,
	} {
		var in []ErrorKind
		for _, r := range errorKinds {
			if slices.Contains(r.engine, f) {
				in = append(in, r.kind)
			}
		}
		if len(in) != 1 {
			t.Errorf("engine kind %q is in rows %v, want exactly one", f, in)
		}
	}
	for _, r := range errorKinds {
		if slices.Contains(r.engine, pktype.ExecutionFailureProviderStatus) || slices.Contains(r.engine, pktype.ExecutionFailureNone) {
			t.Errorf("row %s lists %v: provider_status goes by its code, and none is no failure", r.kind, r.engine)
		}
	}
}
