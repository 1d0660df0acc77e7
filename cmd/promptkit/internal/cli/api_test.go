package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeAPI is the README's walk-through: POST a prompt, watch it
// succeed on the event stream, read the answer; what submit queues from
// the shell shows in the API; once a token exists the API needs it.
func TestServeAPI(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "promptkit.db")
	url, stop := startServe(t, db)
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // deadlock guard
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/events", nil)
	events, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Body.Close()
	lines := bufio.NewScanner(events.Body)
	lines.Scan() // the opening comment: the stream is live

	res, err := http.Post(url+"/v1/prompts", "application/json", strings.NewReader(`{"text":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	var sub struct {
		PromptID string `json:"prompt_id"`
		JobID    string `json:"job_id"`
	}
	if json.NewDecoder(res.Body).Decode(&sub) != nil || res.StatusCode != 202 {
		t.Fatalf("POST /v1/prompts: %d", res.StatusCode)
	}
	res.Body.Close()
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "data: ") && strings.Contains(lines.Text(), `"state":"succeeded"`) {
			if !strings.Contains(lines.Text(), sub.JobID) {
				t.Fatalf("another job succeeded: %s", lines.Text())
			}
			break
		}
	}
	var view struct {
		Answer struct{ Output string }
	}
	getJSON(t, url+"/v1/prompts/"+sub.PromptID, "", &view)
	if view.Answer.Output != "promptkit simulated backend (no backend configured): hi" {
		t.Fatalf("answer: %q", view.Answer.Output)
	}

	// The shell and the API are one identity in loopback mode.
	if code, _, errOut := run(t, "submit", "--database", db, "--text", "from the shell", "--wait"); code != 0 {
		t.Fatalf("submit: %s", errOut)
	}
	var list struct{ Prompts []json.RawMessage }
	getJSON(t, url+"/v1/prompts", "", &list)
	if len(list.Prompts) != 2 {
		t.Fatalf("the API lists %d prompts, want 2", len(list.Prompts))
	}

	code, out, errOut := run(t, "tokens", "create", "--database", db, "--org", "acme", "--user", "ann")
	if code != 0 {
		t.Fatalf("tokens create: %s", errOut)
	}
	outLines := strings.Split(strings.TrimSpace(out), "\n")
	token := outLines[len(outLines)-1]
	if !strings.HasPrefix(token, "pk_") {
		t.Fatalf("the last line is not the token: %q", out)
	}
	getJSON(t, url+"/v1/prompts", token, &list)
	if len(list.Prompts) != 0 {
		t.Fatalf("acme sees the default org's prompts: %d", len(list.Prompts))
	}
	// The token has been presented: local mode is over.
	if code := getJSON(t, url+"/v1/prompts", "", nil); code != 401 {
		t.Fatalf("no token once one exists: %d", code)
	}
	code, out, _ = run(t, "tokens", "list", "--database", db, "--json")
	var toks []struct{ ID string }
	if code != 0 || json.Unmarshal([]byte(out), &toks) != nil || len(toks) != 1 || strings.Contains(out, token) {
		t.Fatalf("tokens list: %d %s", code, out)
	}
	if code, _, errOut := run(t, "tokens", "revoke", toks[0].ID, "--database", db); code != 0 {
		t.Fatalf("revoke: %s", errOut)
	}
	// A revoked token is refused, even though with no valid token left
	// requests without one are accepted again.
	if code := getJSON(t, url+"/v1/prompts", token, nil); code != 401 {
		t.Fatalf("revoked token: %d", code)
	}
	if code := getJSON(t, url+"/v1/prompts", "", nil); code != 200 {
		t.Fatalf("no token, none left: %d", code)
	}
	if code, _, _ := run(t, "tokens", "create", "--database", db, "--org", "acme"); code != 2 {
		t.Fatalf("tokens create without --user: exit %d, want 2", code)
	}
}

// getJSON GETs url with an optional token, decodes into v when non-nil,
// and returns the status.
func getJSON(t *testing.T, url, token string, v any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if v != nil {
		b, _ := io.ReadAll(res.Body)
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %d %s", url, res.StatusCode, b)
		}
	}
	return res.StatusCode
}
