package jobs

// RequestError is a request a dialect's decoder refuses (an API's
// request body, a batch input line): a 400 naming the parameter at fault
// (Param, e.g. "n", "messages[2].content", "" when none), with a
// snake_case Code ("" for the generic one). It is promptkit's own, so the
// server's error classification and the batch processor read a refusal
// the same way whichever dialect decoded the request. Message never
// quotes the request.
type RequestError struct {
	Param   string
	Code    string
	Message string
}

func (e *RequestError) Error() string { return e.Message }

// Target is what a request's model names: a profile, and execution
// options choosing the model (and backend) when the name is a backend's
// model rather than a profile id. Every dialect resolves its model names
// to one.
type Target struct {
	Profile string
	Options ExecutionOptions
}

// ModelResolver says what a model name runs with (promptkit.Engine is
// one).
type ModelResolver interface {
	ResolveModel(model string) (profile, backendModel string, ok bool)
}

// Resolve maps a request's model to a Target, whatever the dialect: a
// model naming nothing runs on the fallback profile when one is given
// (never for an empty model). ok is false for an unknown model, or
// without a resolver.
func Resolve(r ModelResolver, model, fallback string) (Target, bool) {
	if r == nil || model == "" {
		return Target{}, false
	}
	profile, m, ok := r.ResolveModel(model)
	if !ok && fallback != "" {
		profile, m, ok = r.ResolveModel(fallback)
	}
	if !ok {
		return Target{}, false
	}
	return Target{Profile: profile, Options: ExecutionOptions{Model: m}}, true
}
