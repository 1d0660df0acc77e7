package simulate

import (
	"net/http"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/providertest"
)

// The simulated backend serves for as long as serve runs: it must not
// keep every request it answered.
func TestSimulatedBackendKeepsNoHistory(t *testing.T) {
	c := Config().HTTPClient
	for range 5 {
		resp, err := c.Post("http://simulated.invalid/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"`+Model+`","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	h := c.Transport.(transport).h.(*providertest.Handler)
	if n := len(h.Requests()); n != 1 {
		t.Fatalf("the handler holds %d requests after 5, want only the last", n)
	}
}
