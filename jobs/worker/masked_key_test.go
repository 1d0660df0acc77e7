package worker_test

import (
	"strings"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
)

// TestProviderDetailMaskedKey: with KeepProviderDetail, a provider that
// echoes the backend's key masked — its first 6 and last 4 characters
// around stars, as Google's keys show, not shaped like sk-… — leaves
// nothing of the key in the attempt's detail, which the job's member
// reads; nor does a masked key the redaction does not know, next to the
// word "key".
func TestProviderDetailMaskedKey(t *testing.T) {
	const key = "AIzaNOTAREALKEYSECRET2"
	for name, c := range map[string]struct{ message, want string }{
		"the backend's key, masked": {
			"API key not valid: AIzaNO****RET2. Please pass a valid API key.",
			"API key not valid: [REDACTED]. Please pass a valid API key.",
		},
		"the backend's key, cut short": {
			"The key AIzaNOTA... was rejected",
			"The key [REDACTED] was rejected",
		},
		"another key, masked": {
			"Invalid api_key: abcd1234••••••••wxyz",
			"Invalid api_key: [REDACTED]",
		},
	} {
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, f *fixture) {
				w := f.worker("w1", func(c *worker.Config) {
					c.Engine = detailEngine(t, f, key, 0)
					c.KeepProviderDetail = true
				})
				f.srv.Enqueue(providerError(401, c.message))
				e := f.enqueue(jobs.EnqueueParams{Text: "q"})
				f.runOnce(w, 1)
				details, record := attemptDetails(t, f, e.JobID)
				if len(details) != 1 || !strings.HasSuffix(details[0], c.want) {
					t.Fatalf("details %q, want one ending %q", details, c.want)
				}
				for _, part := range []string{"AIzaNO", "RET2", "AIzaNOTA", "abcd1234", "wxyz", "****", "••"} {
					if strings.Contains(record, part) {
						t.Fatalf("%q of a key reached the job's record:\n%s", part, record)
					}
				}
			})
		})
	}
}
