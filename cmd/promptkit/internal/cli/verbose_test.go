package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/providertest"
)

// TestJobsShowVerbosePrintsProviderDetail: a provider refusing the key
// with 401 "Incorrect API key provided: sk-…" reads in `jobs show
// --verbose` under the attempt, redacted, when keep_provider_detail is
// on; plain `jobs show` and the worker's log never show it, and no key
// (the backend's own, or one shaped like a key) is printed anywhere. With
// the setting off nothing is kept.
func TestJobsShowVerbosePrintsProviderDetail(t *testing.T) {
	const (
		ownKey   = "own-backend-key-Zr81Kq0m"
		otherKey = "sk-proj-XyZ0123456789abcdefSECRETsecret"
		keyEnv   = "PROMPTKIT_CLI_TEST_VERBOSE_KEY"
	)
	t.Setenv(keyEnv, ownKey) // not parallel: the engine reads the key from the environment
	message := "Incorrect API key provided: " + otherKey + " (sent " + ownKey + "). You can find your API key at https://platform.openai.com/account/api-keys."
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}})

	for _, keep := range []bool{true, false} {
		srv := providertest.NewServer()
		defer srv.Close()
		srv.Enqueue(providertest.Response{Status: 401, Body: body})
		cfg := quickstart(t, srv.URL)
		raw, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		raw = bytes.Replace(raw, []byte("    timeout: 60s"), []byte("    timeout: 60s\n    api_key_env: "+keyEnv), 1)
		if keep {
			raw = append(raw, "\nservice:\n  keep_provider_detail: true\n"...)
		}
		if err := os.WriteFile(cfg, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		db := filepath.Join(t.TempDir(), "jobs.db")

		code, out, errOut := run(t, "submit", "--config", cfg, "--database", db, "--text", "hi", "--max-attempts", "1", "--json")
		var sub struct {
			JobID string `json:"job_id"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &sub) != nil {
			t.Fatalf("submit: %d %s %s", code, out, errOut)
		}
		code, _, workerLog := run(t, "worker", "--once", "--config", cfg, "--database", db)
		if code != 0 {
			t.Fatalf("worker --once: %d %s", code, workerLog)
		}
		if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer "+ownKey {
			t.Fatalf("the provider saw Authorization %q: the test's key did not reach it", got)
		}
		code, plain, errOut := run(t, "jobs", "show", sub.JobID, "--database", db)
		if code != 0 || !strings.Contains(plain, "error auth") {
			t.Fatalf("jobs show: %d %s\n%s", code, errOut, plain)
		}
		code, verbose, errOut := run(t, "jobs", "show", sub.JobID, "--database", db, "--verbose")
		if code != 0 {
			t.Fatalf("jobs show --verbose: %d %s", code, errOut)
		}
		code, asJSON, errOut := run(t, "jobs", "show", sub.JobID, "--database", db, "--json")
		if code != 0 {
			t.Fatalf("jobs show --json: %d %s", code, errOut)
		}

		const said = "provider said: invalid_request_error: invalid_api_key: Incorrect API key provided: [REDACTED] (sent [REDACTED])."
		if keep {
			// The detail is printed right under its attempt event.
			lines := strings.Split(verbose, "\n")
			found := false
			for i, l := range lines {
				if strings.Contains(l, said) {
					found = i > 0 && strings.Contains(lines[i-1], " attempt {") && strings.Contains(lines[i-1], `"status_code":401`)
				}
			}
			if !found {
				t.Errorf("jobs show --verbose does not print the detail under the 401 attempt:\n%s", verbose)
			}
			if !strings.Contains(asJSON, `"detail"`) {
				t.Errorf("jobs show --json lacks the stored detail:\n%s", asJSON)
			}
		} else if strings.Contains(verbose, "provider said") || strings.Contains(asJSON, `"detail"`) {
			t.Errorf("a detail was kept without keep_provider_detail:\n%s\n%s", verbose, asJSON)
		}
		if strings.Contains(plain, "Incorrect") || strings.Contains(plain, "detail") {
			t.Errorf("plain jobs show prints the provider's message:\n%s", plain)
		}
		if strings.Contains(workerLog, "Incorrect") || !strings.Contains(workerLog, "job settled") {
			t.Errorf("the worker's log has the provider's message, or no settled line:\n%s", workerLog)
		}
		for _, secret := range []string{ownKey, otherKey, "XyZ0123456789"} {
			for name, s := range map[string]string{"jobs show": plain, "jobs show --verbose": verbose, "jobs show --json": asJSON, "worker log": workerLog} {
				if strings.Contains(s, secret) {
					t.Errorf("%s prints %q:\n%s", name, secret, s)
				}
			}
		}
	}
}
