package pgstore_test

import (
	"fmt"
	"testing"

	"github.com/promptkit/promptkit/jobs/pgstore"
)

func BenchmarkAB(b *testing.B) {
	for i := range 6 {
		pgstore.Separate = i%2 == 0
		b.Run(fmt.Sprintf("separate=%v", pgstore.Separate), BenchmarkClaimSucceed)
	}
}
