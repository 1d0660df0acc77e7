// Package promptkit runs LLM prompts reliably against OpenAI-compatible
// backends.
//
// An Engine is built from a Config: backends (endpoints with capacity
// limits), profiles (a backend, a model and parameters) and prompts
// (versioned text/template bodies with optional input and output JSON
// Schemas). Load them from files on disk with LoadConfigFile and
// LoadPromptsDir, from an fs.FS such as an embed.FS with LoadConfig and
// LoadPrompts, or build them in code.
//
// Engine.Run renders a prompt, waits for admission and a backend permit,
// calls the provider, validates the output against the prompt's output
// schema and, within the profile's repair budget, asks the model to repair
// an invalid output. An output that is still invalid is a normal result
// whose Validation.Status is "invalid"; errors are reserved for runs that
// produced no result, and match the package's sentinels with errors.Is
// (ErrInvalidRequest, ErrLLMGenerate, ErrTransport, ErrCapacity, ...) or
// *GenerationError with errors.As.
//
// Capacity has two layers, both owned by one scheduler per Engine: logical
// admission (Config.MaxConcurrentRuns) is held for a whole run, repairs
// included; a backend's active permits (Backend.MaxActive) are held only
// while one request is in flight.
//
// PrepareExecution splits rendering from execution: it returns a
// single-use handle that RunPrepared executes exactly once, however many
// goroutines race to run it.
//
// Package providertest offers an OpenAI-compatible fake provider for tests.
package promptkit
