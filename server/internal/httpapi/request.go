package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/promptkit/promptkit/internal/problem"
)

// MaxIdempotencyKey bounds the Idempotency-Key header.
const MaxIdempotencyKey = 255

// ReadBody reads the request body, at most limit bytes: a longer one is
// a TooLarge problem, one that cannot be read a 400.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if tooBig, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, TooLarge(tooBig.Limit)
		}
		return nil, badJSON("the body could not be read", "The body could not be read.")
	}
	return body, nil
}

// ReadJSON reads the body (see ReadBody) and decodes it strictly into v
// (see DecodeStrict); an empty body leaves v as it is when allowEmpty.
func ReadJSON(w http.ResponseWriter, r *http.Request, limit int64, v any, allowEmpty bool) error {
	body, err := ReadBody(w, r, limit)
	if err != nil {
		return err
	}
	if allowEmpty && len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return DecodeStrict(body, v)
}

func badJSON(msg, sentence string) *Problem {
	return &Problem{Status: http.StatusBadRequest, Kind: problem.BadBody, Code: "invalid_json", Message: msg, Sentence: sentence}
}

// DecodeStrict decodes exactly one JSON value with no unknown fields
// into v; its failure is a 400 that names the offset or the field, never
// the body's text.
func DecodeStrict(body []byte, v any) error {
	if err := decodeStrict(body, v); err != nil {
		return badJSON(err.Error(), "")
	}
	return nil
}

func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
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
	case errors.As(err, new(*time.ParseError)):
		// Its text quotes the value; the decoder names no field.
		return errors.New("a time is not an RFC 3339 time, such as 2026-12-07T15:04:05Z")
	default:
		// Unknown fields ("json: unknown field \"x\"") and other decoder
		// errors name a key of the caller's own request.
		return err
	}
}

// IdempotencyKey is the request's Idempotency-Key ("" when none), or a
// 400 when it is longer than MaxIdempotencyKey.
func IdempotencyKey(r *http.Request) (string, error) {
	key := r.Header.Get("Idempotency-Key")
	if len(key) > MaxIdempotencyKey {
		return "", &Problem{Status: http.StatusBadRequest, Kind: problem.BadValue, Code: "invalid_request", Param: "Idempotency-Key",
			Message: "Idempotency-Key is longer than 255 bytes", Sentence: "Idempotency-Key is longer than 255 bytes."}
	}
	return key, nil
}

// Limit parses ?limit=, 1 to most (empty: 0, the store's default).
func Limit(r *http.Request, most int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, &Problem{Status: http.StatusBadRequest, Kind: problem.BadValue, Code: "invalid_request", Param: "limit",
			Message: "limit must be 1–" + strconv.Itoa(most), Sentence: fmt.Sprintf("limit must be an integer from 1 to %d.", most)}
	}
	return n, nil
}

// Wait parses ?wait=, a Go duration capped at most (none: 0).
func Wait(r *http.Request, most time.Duration) (time.Duration, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, &Problem{Status: http.StatusBadRequest, Kind: problem.BadValue, Code: "invalid_request", Param: "wait",
			Message: "wait must be a duration such as 30s"}
	}
	return min(d, most), nil
}

// Fingerprint is the RequestHash stored with an Idempotency-Key: the
// request's hash and its user, so that another member reusing a key gets
// a conflict, never someone else's ids.
func Fingerprint(user, requestHash string) string {
	sum := sha256.Sum256([]byte(user + "\x00" + requestHash))
	return hex.EncodeToString(sum[:])
}

// Hash fingerprints a request's meaning: v as JSON, with the raw JSON
// values it holds re-encoded canonically first (see CanonicalJSON) by the
// caller, so key order and spacing do not count.
func Hash(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// CanonicalJSON re-encodes a JSON value with sorted object keys.
func CanonicalJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	b, _ := json.Marshal(v)
	return b
}
