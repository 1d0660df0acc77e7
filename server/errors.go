package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
)

// apiError is the body of every error answer:
// {"error": {"code": "...", "message": "..."}}. Messages never repeat
// request bodies, prompts or provider text.
type apiError struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v) // a failed write is the client's disconnect
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiError{errorBody{Code: code, Message: msg}})
}

// failure maps an error of the store or the engine to its answer, in one
// table. Anything unknown is a 500 whose cause is logged, not sent.
func (s *Server) failure(w http.ResponseWriter, r *http.Request, what string, err error) {
	var te *jobs.TransitionError
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", what+": not found")
	case errors.As(err, &te):
		writeError(w, http.StatusConflict, "conflict", fmt.Sprintf("%s: the job is %s", what, te.From))
	case errors.Is(err, jobs.ErrIdempotencyConflict):
		writeError(w, http.StatusUnprocessableEntity, "idempotency_conflict", "the Idempotency-Key was used with a different request")
	case errors.Is(err, jobs.ErrInvalid),
		errors.Is(err, promptkit.ErrInvalidRequest),
		errors.Is(err, promptkit.ErrPromptNotFound),
		errors.Is(err, promptkit.ErrProfileNotFound):
		writeError(w, http.StatusBadRequest, "invalid_request", jobs.InvalidMessage(err))
	default:
		s.internal(w, r, what, err)
	}
}

// invalidField is the parameter an invalid request names, "" when none.
func invalidField(err error) string {
	if ie, ok := errors.AsType[*jobs.InvalidError](err); ok {
		return ie.Field
	}
	return ""
}

// internal answers 500 and logs the cause with the route.
func (s *Server) internal(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.log.Error("request failed", "route", r.Pattern, "op", what, "err", err)
	writeError(w, http.StatusInternalServerError, "internal", "internal error")
}

// decode reads one JSON value into v: unknown fields, a wrong type,
// malformed JSON or trailing data are a 400 (answered here, returning
// false), a body over the cap a 413. An empty body decodes as {} when
// allowEmpty.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is over %d bytes", tooBig.Limit))
			return false
		}
		writeError(w, http.StatusBadRequest, "invalid_json", "the body could not be read")
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 && allowEmpty {
		return true
	}
	if err := decodeStrict(body, v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_json", err.Error())
		return false
	}
	return true
}

// decodeStrict decodes exactly one JSON value with no unknown fields. Its
// errors name the offset or field, never the body's text.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
		if dec.More() {
			return errors.New("the body holds more than one JSON value")
		}
		if _, err := dec.Token(); err != io.EOF {
			return errors.New("the body holds more than one JSON value")
		}
		return nil
	case errors.Is(err, io.EOF):
		return errors.New("the body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the JSON is cut off")
	case errors.As(err, &syn):
		return fmt.Errorf("malformed JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return errors.New("expected a JSON object")
		}
		return fmt.Errorf("field %s: expected %s", typ.Field, typ.Type)
	default:
		// Unknown fields ("json: unknown field \"x\"") and other decoder
		// errors name a key of the caller's own request.
		return err
	}
}
