package benchkit

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// CallJSON sends a request with client and decodes a 2xx JSON answer (at
// most 1 MiB: the programs read batch and file objects) into out.
func CallJSON(client *http.Client, method, url, contentType string, body io.Reader, out any) error {
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, b)
	}
	return json.Unmarshal(b, out)
}

// BatchTerminal reports whether an OpenAI batch status is final.
func BatchTerminal(status string) bool {
	switch status {
	case "completed", "failed", "expired", "cancelled":
		return true
	}
	return false
}
