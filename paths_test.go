package promptkit_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/promptkit/promptkit"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

const pathsConfig = "backends:\n  - {id: a, base_url: 'http://127.0.0.1:1/v1'}\nprofiles:\n  - {id: p, backend: a, model: m}\nprompts: %s\n"

// LoadConfigFile resolves prompts against the config file's folder, not
// the working directory, and accepts ".." and absolute paths.
func TestLoadConfigFilePromptsPaths(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "shared", "prompts", "hi.md"), "---\n---\nHi {{.name}}")
	writeFile(t, filepath.Join(root, "app", "prompts", "local.md"), "---\n---\nLocal")
	t.Chdir(t.TempDir()) // somewhere unrelated

	for _, dir := range []string{"prompts", "./prompts", "../shared/prompts", filepath.Join(root, "shared", "prompts")} {
		cfgPath := filepath.Join(root, "app", "promptkit.yaml")
		writeFile(t, cfgPath, strings.Replace(pathsConfig, "%s", "'"+dir+"'", 1))
		cfg, err := promptkit.LoadConfigFile(cfgPath)
		if err != nil {
			t.Fatalf("prompts: %s: %v", dir, err)
		}
		if len(cfg.Prompts) != 1 {
			t.Fatalf("prompts: %s: loaded %+v", dir, cfg.Prompts)
		}
		if _, err := promptkit.New(cfg); err != nil {
			t.Fatalf("prompts: %s: %v", dir, err)
		}
	}

	// A relative config path works from its own folder too.
	t.Chdir(filepath.Join(root, "app"))
	writeFile(t, "promptkit.yaml", strings.Replace(pathsConfig, "%s", "../shared/prompts", 1))
	if cfg, err := promptkit.LoadConfigFile("promptkit.yaml"); err != nil || len(cfg.Prompts) != 1 || cfg.Prompts[0].ID != "hi" {
		t.Fatalf("relative config: %+v, %v", cfg.Prompts, err)
	}

	// Errors name the directory and the prompt files by their path on disk.
	writeFile(t, "promptkit.yaml", strings.Replace(pathsConfig, "%s", "../nowhere", 1))
	_, err := promptkit.LoadConfigFile("promptkit.yaml")
	want := "promptkit.yaml: prompts: directory " + filepath.Join("..", "nowhere") + ": does not exist"
	if !errors.Is(err, promptkit.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
	bad := filepath.Join(root, "shared", "prompts", "bad.md")
	writeFile(t, bad, "---\noutput_schema: {type: objectt}\n---\nx")
	_, err = promptkit.LoadPromptsDir(filepath.Join(root, "shared", "prompts"))
	if !errors.Is(err, promptkit.ErrInvalidConfig) || !strings.Contains(err.Error(), bad+": output_schema: not a valid JSON Schema: at /type") {
		t.Fatalf("err = %v, want the file's path %s", err, bad)
	}
	if _, err := promptkit.LoadConfigFile(filepath.Join(root, "missing.yaml")); !errors.Is(err, promptkit.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), filepath.Join(root, "missing.yaml")+": does not exist") {
		t.Fatalf("missing file: %v", err)
	}
}

// LoadConfig reads an fs.FS, which cannot reach outside itself: an
// absolute prompts path or one leading out says so, naming the path as
// written, instead of a mangled one.
func TestLoadConfigFSPromptsOutside(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"conf/promptkit.yaml":   {Data: []byte(strings.Replace(pathsConfig, "%s", "../prompts", 1))},
		"prompts/hi.md":         {Data: []byte("---\n---\nHi")},
		"abs/promptkit.yaml":    {Data: []byte(strings.Replace(pathsConfig, "%s", "/srv/prompts", 1))},
		"escape/promptkit.yaml": {Data: []byte(strings.Replace(pathsConfig, "%s", "../../prompts", 1))},
		"none/promptkit.yaml":   {Data: []byte(strings.Replace(pathsConfig, "%s", "nowhere", 1))},
	}
	// Inside the FS, ".." from the config's folder is fine.
	if cfg, err := promptkit.LoadConfig(fsys, "conf/promptkit.yaml"); err != nil || len(cfg.Prompts) != 1 {
		t.Fatalf("../prompts inside the FS: %+v, %v", cfg.Prompts, err)
	}
	cases := []struct{ file, want string }{
		{"abs/promptkit.yaml", `abs/promptkit.yaml: prompts: "/srv/prompts" is an absolute path`},
		{"escape/promptkit.yaml", `escape/promptkit.yaml: prompts: "../../prompts" leads outside`},
		{"none/promptkit.yaml", "none/promptkit.yaml: prompts: directory none/nowhere: does not exist"},
	}
	for _, c := range cases {
		_, err := promptkit.LoadConfig(fsys, c.file)
		if !errors.Is(err, promptkit.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.file, err, c.want)
		}
		if c.file != "none/promptkit.yaml" && (err == nil || !strings.Contains(err.Error(), "LoadConfigFile")) {
			t.Errorf("%s: %v does not point to LoadConfigFile", c.file, err)
		}
	}
}
