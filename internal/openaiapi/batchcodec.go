package openaiapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/batch"
)

// BatchCodec is OpenAI's batch file format for the batch processor
// (batch.Codec): input lines as ParseBatchLine reads them, output and
// error lines as OutputLine and RefusedLine write them.
type BatchCodec struct{}

var _ batch.Codec = BatchCodec{}

// methodPost is the only method a batch line may name.
const methodPost = "POST"

// Envelope is the line's custom_id and body members as sent; nil when
// absent or when the line is no JSON object.
func (BatchCodec) Envelope(line []byte) (customID, body []byte) {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return nil, nil
	}
	return m["custom_id"], m["body"]
}

// DecodeLine decodes a line with ParseBatchLine and checks its own
// fields against the batch: a custom_id, method POST, and url the
// batch's endpoint. Those are checked before the body's errors, since
// the body is decoded as its url's request: a line for another endpoint
// is a url_mismatch rather than that endpoint's body errors
// (ParseBatchLine has read them when only the body is wrong).
func (BatchCodec) DecodeLine(line []byte, endpoint string) (batch.Line, error) {
	l, err := ParseBatchLine(line)
	header := func() error {
		switch {
		case l.CustomID == "":
			return &jobs.RequestError{Code: batch.CodeInvalid, Param: "custom_id", Message: "custom_id is missing or empty."}
		case l.Method != methodPost:
			return &jobs.RequestError{Code: batch.CodeInvalid, Param: "method", Message: "method must be POST."}
		case l.URL != endpoint:
			return &jobs.RequestError{Code: batch.CodeURLMismatch, Param: "url",
				Message: fmt.Sprintf("url must be the batch's endpoint, %s.", endpoint)}
		}
		return nil
	}
	if err != nil {
		if re, ok := errors.AsType[*jobs.RequestError](err); ok && (re.Param == "body" || strings.HasPrefix(re.Param, "body.")) {
			if e := header(); e != nil {
				return batch.Line{}, e
			}
		}
		return batch.Line{}, err
	}
	if err := header(); err != nil {
		return batch.Line{}, err
	}
	out := batch.Line{CustomID: l.CustomID, Model: l.Model()}
	if l.Embedding != nil {
		e := l.Embedding.Request()
		out.Embedding = &e
	} else {
		chat := l.Body.Chat
		out.Chat = &chat
	}
	return out, nil
}

// EncodeResult is OutputLine.
func (BatchCodec) EncodeResult(r jobs.BatchResult, status jobs.BatchStatus) ([]byte, bool) {
	return OutputLine(r, status)
}

// EncodeRefused is RefusedLine.
func (BatchCodec) EncodeRefused(id, customID, code, message string) []byte {
	return RefusedLine(id, customID, code, message)
}
