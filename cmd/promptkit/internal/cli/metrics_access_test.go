package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// serve's /metrics needs an admin token once tokens exist, unless
// metrics_access (or --metrics-access) says otherwise.
func TestServeMetricsAccess(t *testing.T) {
	t.Parallel()
	dir, cfg := inDir(t, "service:\n  metrics_access: open\n")
	db := filepath.Join(dir, "m.db")
	token := func(role string) string {
		t.Helper()
		out := expect(t, 0, []string{"tokens", "create", "--database", db, "--org", "acme", "--user", role, "--role", role}, "pk_")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return lines[len(lines)-1]
	}
	member, admin := token("member"), token("admin")

	url, stop := startServe(t, db)
	for name, c := range map[string]struct {
		token string
		want  int
	}{"no token": {"", 401}, "member": {member, 403}, "admin": {admin, 200}} {
		if code := getJSON(t, url+"/metrics", c.token, nil); code != c.want {
			t.Errorf("default access, %s: %d, want %d", name, code, c.want)
		}
	}
	stop()

	url, stop = startServe(t, db, "--config", cfg)
	if code := getJSON(t, url+"/metrics", "", nil); code != 200 {
		t.Errorf("metrics_access: open, no token: %d, want 200", code)
	}
	stop()

	// The flag overrides the file.
	url, stop = startServe(t, db, "--config", cfg, "--metrics-access", "off")
	if code := getJSON(t, url+"/metrics", admin, nil); code != 404 {
		t.Errorf("--metrics-access off: %d, want 404", code)
	}
	stop()

	_, bad := inDir(t, "service:\n  metrics_access: public\n")
	expect(t, 2, []string{"serve", "--config", bad, "--database", db}, `metrics_access "public": want auth, open or off`)
	expect(t, 2, []string{"serve", "--database", db, "--metrics-access", "nobody"}, `--metrics-access "nobody"`)
}
