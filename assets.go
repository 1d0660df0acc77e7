package promptkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"go.yaml.in/yaml/v3"
)

// fileConfig is the shape of promptkit.yaml.
type fileConfig struct {
	Backends          []Backend `yaml:"backends"`
	Profiles          []Profile `yaml:"profiles"`
	Prices            []Price   `yaml:"prices"`
	DefaultProfile    string    `yaml:"default_profile"`
	MaxConcurrentRuns int       `yaml:"max_concurrent_runs"`
	MaxQueuedRuns     int       `yaml:"max_queued_runs"`
	TransientRetries  *int      `yaml:"transient_retries"`
	// Prompts is a directory of prompt files, relative to the config file.
	Prompts string `yaml:"prompts"`
	// Service configures the job service (promptkit serve and worker),
	// which reads it itself; the library ignores it.
	Service yaml.Node `yaml:"service"`
}

// LoadConfig reads a promptkit.yaml file from fsys: backends, profiles,
// prices, default_profile, max_concurrent_runs, max_queued_runs,
// transient_retries, and optionally
// prompts, a directory of prompt files relative to the file's folder (see
// LoadPrompts). Unknown keys are errors. Every error matches
// ErrInvalidConfig and names the file and the field.
//
// Use an embed.FS for compiled-in assets. An fs.FS cannot reach outside
// itself, so a prompts directory given as an absolute path, or one that
// leads out of fsys with "..", is an error here: for files on disk use
// LoadConfigFile, which allows both.
func LoadConfig(fsys fs.FS, name string) (Config, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return parseConfig(data, name, func(dir string) ([]Prompt, error) {
		if path.IsAbs(dir) || filepath.IsAbs(dir) {
			return nil, &fieldError{source: name, field: "prompts", msg: fmt.Sprintf("%q is an absolute path, which LoadConfig cannot read from its fs.FS; load the file with LoadConfigFile", dir)}
		}
		full := path.Join(path.Dir(name), filepath.ToSlash(dir))
		if !fs.ValidPath(full) {
			return nil, &fieldError{source: name, field: "prompts", msg: fmt.Sprintf("%q leads outside the fs.FS LoadConfig reads from; load the file with LoadConfigFile", dir)}
		}
		return loadPrompts(fsys, full, func(p string) string { return p })
	})
}

// LoadConfigFile reads a promptkit.yaml file from disk, as LoadConfig
// does, except that its prompts directory may be absolute or lead out of
// the file's folder ("../shared/prompts"); a relative one is resolved
// against the file's folder, not the working directory. Errors name files
// by their path on disk.
func LoadConfigFile(file string) (Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, file, pathProblem(err))
	}
	return parseConfig(data, file, func(dir string) ([]Prompt, error) {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(filepath.Dir(file), filepath.FromSlash(dir))
		}
		return LoadPromptsDir(dir)
	})
}

// LoadPromptsDir is LoadPrompts for a directory on disk, absolute or
// relative to the working directory. Errors name files by their path on
// disk.
func LoadPromptsDir(dir string) ([]Prompt, error) {
	return loadPrompts(os.DirFS(dir), ".", func(p string) string { return filepath.Join(dir, filepath.FromSlash(p)) })
}

// parseConfig decodes and checks a config file's data; name is how errors
// name the file, and prompts loads its prompts directory as written.
func parseConfig(data []byte, name string, prompts func(dir string) ([]Prompt, error)) (Config, error) {
	var fc fileConfig
	if err := decodeYAMLStrict(data, &fc); err != nil {
		return Config{}, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, name, err)
	}
	cfg := Config{
		Backends:          fc.Backends,
		Profiles:          fc.Profiles,
		Prices:            fc.Prices,
		DefaultProfile:    fc.DefaultProfile,
		MaxConcurrentRuns: fc.MaxConcurrentRuns,
		MaxQueuedRuns:     fc.MaxQueuedRuns,
		TransientRetries:  fc.TransientRetries,
	}
	if err := validateConfig(&cfg, name); err != nil {
		return Config{}, err
	}
	if fc.Prompts != "" {
		var err error
		if cfg.Prompts, err = prompts(fc.Prompts); err != nil {
			var de *dirError
			if errors.As(err, &de) {
				return Config{}, &fieldError{source: name, field: "prompts", msg: fmt.Sprintf("directory %s: %s", de.dir, de.problem)}
			}
			return Config{}, err
		}
	}
	return cfg, nil
}

// pathProblem says why a file or directory could not be read, without
// repeating its path.
func pathProblem(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "does not exist"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	case errors.Is(err, fs.ErrInvalid):
		return "not a valid path"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// dirError is a prompts directory that cannot be read.
type dirError struct{ dir, problem string }

func (e *dirError) Error() string        { return fmt.Sprintf("prompts directory %s: %s", e.dir, e.problem) }
func (e *dirError) Is(target error) bool { return target == ErrInvalidConfig }

var yamlUnknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)

// decodeYAMLStrict decodes one YAML document, rejecting unknown keys, and
// rewrites the decoder's messages to name fields rather than Go types.
func decodeYAMLStrict(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			msgs := make([]string, len(te.Errors))
			for i, m := range te.Errors {
				m = yamlUnknownField.ReplaceAllString(m, `unknown field "$1"`)
				msgs[i] = strings.ReplaceAll(m, "into time.Duration", "into a duration (write it with a unit, like 60s)")
			}
			return errors.New(strings.Join(msgs, "; "))
		}
		if errors.Is(err, io.EOF) {
			return nil // an empty file is an empty config
		}
		return err
	}
	return nil
}

// promptFront is a prompt file's front matter.
type promptFront struct {
	ID           string `yaml:"id"`
	Version      string `yaml:"version"`
	Description  string `yaml:"description"`
	InputSchema  any    `yaml:"input_schema"`
	OutputSchema any    `yaml:"output_schema"`
}

// LoadPrompts reads every prompt file (*.prompt or *.md, except README.md)
// in dir of fsys, recursively, sorted by path. See ParsePrompt for the
// format. Errors match ErrInvalidConfig and name the file.
func LoadPrompts(fsys fs.FS, dir string) ([]Prompt, error) {
	return loadPrompts(fsys, dir, func(p string) string { return p })
}

// loadPrompts is LoadPrompts; show turns a path in fsys into the name
// errors use.
func loadPrompts(fsys fs.FS, dir string, show func(string) string) ([]Prompt, error) {
	var names []string
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		ext := path.Ext(p)
		if d.IsDir() || (ext != ".prompt" && ext != ".md") || strings.EqualFold(d.Name(), "README.md") {
			return nil
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		p := dir
		var pe *fs.PathError
		if errors.As(err, &pe) {
			p = pe.Path
		}
		return nil, &dirError{dir: show(p), problem: pathProblem(err)}
	}
	sort.Strings(names)
	seen := map[string]string{}
	prompts := make([]Prompt, 0, len(names))
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, show(name), pathProblem(err))
		}
		p, err := ParsePrompt(show(name), data)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[p.ID]; dup {
			return nil, &fieldError{source: show(name), field: "id", msg: fmt.Sprintf("prompt %q already defined in %s", p.ID, first)}
		}
		seen[p.ID] = show(name)
		prompts = append(prompts, p)
	}
	return prompts, nil
}

// ParsePrompt parses one prompt file: YAML front matter between "---"
// lines, then the text/template body.
//
//	---
//	id: summarize            # defaults to the file name without extension
//	version: 2
//	description: One-line summary.
//	input_schema:            # optional JSON Schema, written as YAML or JSON
//	  type: object
//	  required: [text]
//	output_schema:           # optional; the output must then be JSON
//	  type: object
//	  properties: {summary: {type: string}}
//	  required: [summary]
//	---
//	Summarize in one sentence: {{.text}}
//
// name is used for the default ID and in errors, which match
// ErrInvalidConfig.
func ParsePrompt(name string, data []byte) (Prompt, error) {
	bad := func(field, format string, args ...any) error {
		return &fieldError{source: name, field: field, msg: fmt.Sprintf(format, args...)}
	}
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	text = strings.TrimPrefix(text, "\ufeff")
	if !strings.HasPrefix(text, "---\n") {
		return Prompt{}, bad("front matter", `file must start with a "---" line`)
	}
	front, body, ok := strings.Cut(text[len("---\n"):], "\n---\n")
	if !ok {
		if strings.HasSuffix(text, "\n---") {
			front, body, ok = text[len("---\n"):len(text)-len("\n---")], "", true
		} else if strings.HasPrefix(text[len("---\n"):], "---\n") {
			front, body, ok = "", text[2*len("---\n"):], true
		}
	}
	if !ok {
		return Prompt{}, bad("front matter", `missing closing "---" line`)
	}
	var fm promptFront
	if err := decodeYAMLStrict([]byte(front), &fm); err != nil {
		return Prompt{}, fmt.Errorf("%w: %s: front matter: %w", ErrInvalidConfig, name, err)
	}
	p := Prompt{ID: fm.ID, Version: fm.Version, Description: fm.Description, Template: body}
	if p.ID == "" {
		base := path.Base(filepath.ToSlash(name))
		p.ID = strings.TrimSuffix(base, path.Ext(base))
	}
	if !idPattern.MatchString(p.ID) {
		return Prompt{}, bad("id", "%q must match %s", p.ID, idPattern)
	}
	var err error
	if p.InputSchema, err = schemaJSON(fm.InputSchema); err != nil {
		return Prompt{}, bad("input_schema", "%v", err)
	}
	if p.OutputSchema, err = schemaJSON(fm.OutputSchema); err != nil {
		return Prompt{}, bad("output_schema", "%v", err)
	}
	// Compile here too, so that a schema error names this file.
	if _, err := compileSchema("promptkit:///"+p.ID+"/input.json", p.InputSchema); err != nil {
		return Prompt{}, bad("input_schema", "%v", err)
	}
	if _, err := compileSchema("promptkit:///"+p.ID+"/output.json", p.OutputSchema); err != nil {
		return Prompt{}, bad("output_schema", "%v", err)
	}
	if _, err := parseTemplate(p); err != nil {
		return Prompt{}, bad("template", "%v", err)
	}
	return p, nil
}

// schemaJSON turns a schema written in YAML into JSON.
func schemaJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	if _, ok := v.(map[string]any); !ok {
		if _, isBool := v.(bool); !isBool {
			return nil, errors.New("must be a mapping (a JSON Schema object)")
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cannot be represented as JSON: %w", err)
	}
	return b, nil
}

func parseTemplate(p Prompt) (*template.Template, error) {
	return template.New(p.ID).Option("missingkey=error").Parse(p.Template)
}
