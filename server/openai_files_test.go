package server

import (
	"bytes"
	"context"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
)

// multipartBody builds an upload: the fields in order, each a name and
// value; a value for "file" is sent as a file named filename.
func multipartBody(t *testing.T, filename string, fields ...string) (string, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		var err error
		if fields[i] == "file" {
			var w interface{ Write([]byte) (int, error) }
			if w, err = mw.CreateFormFile("file", filename); err == nil {
				_, err = w.Write([]byte(fields[i+1]))
			}
		} else {
			err = mw.WriteField(fields[i], fields[i+1])
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String(), mw.FormDataContentType()
}

const batchInput = `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"default","messages":[{"role":"user","content":"hi"}]}}
{"custom_id":"b","method":"POST","url":"/v1/chat/completions","body":{"model":"default","messages":[{"role":"user","content":"yo"}]}}
`

// upload posts a batch input file and returns its object.
func (e *env) upload(token, content string) openaiapi.File {
	e.t.Helper()
	body, ct := multipartBody(e.t, "input.jsonl", "purpose", "batch", "file", content)
	r := e.call("POST", "/v1/files", token, body, "Content-Type", ct)
	if r.code != 200 {
		e.t.Fatalf("upload: %d %s", r.code, r.body)
	}
	var f openaiapi.File
	r.decode(e.t, &f)
	return f
}

func TestOpenAIFiles(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		// The file part may come before purpose.
		body, ct := multipartBody(t, "input.jsonl", "file", batchInput, "purpose", "batch")
		r := e.call("POST", "/v1/files", "sk-any", body, "Content-Type", ct)
		var f openaiapi.File
		r.decode(t, &f)
		if r.code != 200 || !strings.HasPrefix(f.ID, "file-") || f.Object != "file" || f.Bytes != int64(len(batchInput)) ||
			f.Filename != "input.jsonl" || f.Purpose != "batch" || f.CreatedAt == 0 {
			t.Fatalf("upload: %d %s", r.code, r.body)
		}
		second := e.upload("", "{}\n")

		var got openaiapi.File
		e.call("GET", "/v1/files/"+f.ID, "", nil).decode(t, &got)
		if got != f {
			t.Errorf("get: %+v, want %+v", got, f)
		}
		var l openaiapi.List[openaiapi.File]
		r = e.call("GET", "/v1/files", "", nil)
		r.decode(t, &l)
		if r.code != 200 || len(l.Data) != 2 || l.Data[0].ID != second.ID || l.Data[1].ID != f.ID || l.HasMore ||
			*l.FirstID != second.ID || *l.LastID != f.ID {
			t.Fatalf("list: %d %s", r.code, r.body)
		}
		e.call("GET", "/v1/files?limit=1&order=desc&purpose=batch", "", nil).decode(t, &l)
		if len(l.Data) != 1 || l.Data[0].ID != second.ID || !l.HasMore {
			t.Fatalf("first page: %+v", l)
		}
		e.call("GET", "/v1/files?limit=1&after="+second.ID, "", nil).decode(t, &l)
		if len(l.Data) != 1 || l.Data[0].ID != f.ID || l.HasMore {
			t.Fatalf("second page: %+v", l)
		}
		e.call("GET", "/v1/files?purpose=batch_output", "", nil).decode(t, &l)
		if len(l.Data) != 0 || l.FirstID != nil {
			t.Fatalf("by purpose: %+v", l)
		}
		for _, q := range []string{"order=asc", "limit=0", "limit=x"} {
			if r := e.call("GET", "/v1/files?"+q, "", nil); r.code != 400 || r.oaErr(t).Param == nil {
				t.Errorf("%s: %d %s", q, r.code, r.body)
			}
		}

		r = e.call("GET", "/v1/files/"+f.ID+"/content", "", nil)
		if r.code != 200 || string(r.body) != batchInput || r.header.Get("Content-Type") != "application/jsonl" {
			t.Fatalf("content: %d %v %q", r.code, r.header, r.body)
		}

		var del openaiapi.DeletedFile
		r = e.call("DELETE", "/v1/files/"+f.ID, "", nil)
		r.decode(t, &del)
		if r.code != 200 || del != (openaiapi.DeletedFile{ID: f.ID, Object: "file", Deleted: true}) {
			t.Fatalf("delete: %d %s", r.code, r.body)
		}
		for _, route := range [][2]string{{"GET", "/v1/files/" + f.ID}, {"GET", "/v1/files/" + f.ID + "/content"}, {"DELETE", "/v1/files/" + f.ID}} {
			if r := e.call(route[0], route[1], "", nil); r.code != 404 || r.oaErr(t).Type != openaiapi.TypeInvalidRequest {
				t.Errorf("%v after delete: %d %s", route, r.code, r.body)
			}
		}
	})
}

func TestOpenAIFileUploadRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.MaxFileBytes = 100 })
	// Over the cap: 413, and nothing is stored.
	body, ct := multipartBody(t, "big.jsonl", "purpose", "batch", "file", strings.Repeat("x", 5000))
	r := e.call("POST", "/v1/files", "", body, "Content-Type", ct)
	if er := r.oaErr(t); r.code != 413 || deref(er.Code) != "file_too_large" {
		t.Fatalf("over the cap: %d %s", r.code, r.body)
	}
	exact, ct2 := multipartBody(t, "ok.jsonl", "purpose", "batch", "file", strings.Repeat("x", 100))
	form := func(filename string, fields ...string) [2]string {
		b, ct := multipartBody(t, filename, fields...)
		return [2]string{b, ct}
	}
	for _, c := range []struct {
		name  string
		body  [2]string
		code  int
		param string
	}{
		{"purpose", form("in.jsonl", "purpose", "fine-tune", "file", "{}"), 400, "purpose"},
		{"no purpose", form("in.jsonl", "file", "{}"), 400, "purpose"},
		{"no file", form("in.jsonl", "purpose", "batch"), 400, "file"},
		{"no filename", form("", "purpose", "batch", "file", "{}"), 400, "file"},
		{"other field", form("in.jsonl", "purpose", "batch", "expires_after", "1", "file", "{}"), 400, "<null>"},
		{"not multipart", [2]string{`{"purpose":"batch"}`, "application/json"}, 400, "<null>"},
	} {
		r := e.call("POST", "/v1/files", "", c.body[0], "Content-Type", c.body[1])
		if r.code != c.code || deref(r.oaErr(t).Param) != c.param {
			t.Errorf("%s: %d %s", c.name, r.code, r.body)
		}
	}
	files, _, err := e.st.ListFiles(context.Background(), jobs.FileListParams{OrgID: LocalOrg})
	if err != nil || len(files) != 0 {
		t.Fatalf("refused uploads stored %d files (%v)", len(files), err)
	}
	// Exactly the cap is fine.
	if r := e.call("POST", "/v1/files", "", exact, "Content-Type", ct2); r.code != 200 {
		t.Errorf("at the cap: %d %s", r.code, r.body)
	}
}

func TestOpenAIBatches(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		f := e.upload("", batchInput)
		r := e.call("POST", "/v1/batches", "", `{"input_file_id":"`+f.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h","metadata":{"team":"x"}}`)
		var b openaiapi.Batch
		r.decode(t, &b)
		if r.code != 200 || !strings.HasPrefix(b.ID, "batch_") || b.Object != "batch" || b.Status != "validating" ||
			b.InputFileID != f.ID || b.Endpoint != "/v1/chat/completions" || b.CompletionWindow != "24h" ||
			string(b.Metadata) != `{"team":"x"}` || b.ExpiresAt == nil || *b.ExpiresAt != b.CreatedAt+24*3600 || b.Errors != nil {
			t.Fatalf("create: %d %s", r.code, r.body)
		}
		stored, err := e.st.GetBatch(context.Background(), "", b.ID)
		if err != nil || stored.Priority != jobs.DefaultBatchPriority || stored.OrgID != LocalOrg {
			t.Fatalf("stored: %+v %v", stored, err)
		}

		var got openaiapi.Batch
		e.call("GET", "/v1/batches/"+b.ID, "", nil).decode(t, &got)
		if got.ID != b.ID || got.Status != "validating" {
			t.Errorf("get: %+v", got)
		}
		other := e.call("POST", "/v1/batches", "", `{"input_file_id":"`+f.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`)
		var b2 openaiapi.Batch
		other.decode(t, &b2)
		var l openaiapi.List[openaiapi.Batch]
		e.call("GET", "/v1/batches", "", nil).decode(t, &l)
		if len(l.Data) != 2 || l.Data[0].ID != b2.ID || l.Data[1].ID != b.ID || l.HasMore {
			t.Fatalf("list: %+v", l)
		}
		e.call("GET", "/v1/batches?limit=1", "", nil).decode(t, &l)
		if len(l.Data) != 1 || l.Data[0].ID != b2.ID || !l.HasMore {
			t.Fatalf("first page: %+v", l)
		}
		e.call("GET", "/v1/batches?limit=1&after="+b2.ID, "", nil).decode(t, &l)
		if len(l.Data) != 1 || l.Data[0].ID != b.ID || l.HasMore {
			t.Fatalf("second page: %+v", l)
		}

		// Cancel: validating → cancelling; again, the same answer.
		for range 2 {
			r = e.call("POST", "/v1/batches/"+b.ID+"/cancel", "", nil)
			r.decode(t, &got)
			if r.code != 200 || got.Status != "cancelling" || got.CancellingAt == nil {
				t.Fatalf("cancel: %d %s", r.code, r.body)
			}
		}
		// ?wait= holds a read until the batch is terminal: it answers
		// completed, whether the batch finished before or after the read.
		held := e.callAsync("GET", "/v1/batches/"+b2.ID+"?wait=50s", "", "")
		if r := e.call("GET", "/v1/batches/"+b2.ID+"?wait=soon", "", nil); r.code != 400 || deref(r.oaErr(t).Param) != "wait" {
			t.Errorf("bad wait: %d %s", r.code, r.body)
		}
		// A completed batch cannot be cancelled.
		ctx := context.Background()
		for _, mv := range [][2]jobs.BatchStatus{{jobs.BatchValidating, jobs.BatchInProgress}, {jobs.BatchInProgress, jobs.BatchFinalizing}} {
			if _, err := e.st.MoveBatch(ctx, jobs.MoveBatchParams{ID: b2.ID, From: mv[0], To: mv[1]}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.st.FinishBatch(ctx, jobs.FinishBatchParams{ID: b2.ID, From: jobs.BatchFinalizing, To: jobs.BatchCompleted,
			Output: strings.NewReader("{}\n"), Counts: jobs.BatchCounts{Total: 2, Completed: 2}}); err != nil {
			t.Fatal(err)
		}
		r = held()
		r.decode(t, &got)
		if r.code != 200 || got.Status != "completed" {
			t.Fatalf("held read: %d %s", r.code, r.body)
		}
		r = e.call("POST", "/v1/batches/"+b2.ID+"/cancel", "", nil)
		if r.code != 409 || deref(r.oaErr(t).Code) != "batch_not_cancellable" || !strings.Contains(r.oaErr(t).Message, "completed") {
			t.Fatalf("cancel completed: %d %s", r.code, r.body)
		}
		e.call("GET", "/v1/batches/"+b2.ID, "", nil).decode(t, &got)
		if got.Status != "completed" || got.OutputFileID == nil || got.CompletedAt == nil || got.RequestCounts.Completed != 2 {
			t.Fatalf("completed: %+v", got)
		}
		// Its output file is readable like any other.
		if r := e.call("GET", "/v1/files/"+*got.OutputFileID+"/content", "", nil); r.code != 200 || string(r.body) != "{}\n" {
			t.Errorf("output file: %d %q", r.code, r.body)
		}

		for _, c := range []struct{ body, param string }{
			{`{"input_file_id":"file-nope","endpoint":"/v1/chat/completions","completion_window":"24h"}`, "input_file_id"},
			{`{"input_file_id":"` + *got.OutputFileID + `","endpoint":"/v1/chat/completions","completion_window":"24h"}`, "input_file_id"},
			{`{"input_file_id":"` + f.ID + `","endpoint":"/v1/completions","completion_window":"24h"}`, "endpoint"},
			{`{"input_file_id":"` + f.ID + `","endpoint":"/v1/chat/completions","completion_window":"1h"}`, "completion_window"},
			{`{"input_file_id":"` + f.ID + `","endpoint":"/v1/chat/completions","completion_window":"24h","metadata":{"a":1}}`, "metadata"},
			{`{"input_file_id":"` + f.ID + `","endpoint":"/v1/chat/completions","completion_window":"24h","extra":1}`, "extra"},
		} {
			if r := e.call("POST", "/v1/batches", "", c.body); r.code != 400 || deref(r.oaErr(t).Param) != c.param {
				t.Errorf("%s: %d %s", c.body, r.code, r.body)
			}
		}
		for _, route := range [][2]string{{"GET", "/v1/batches/batch_nope"}, {"POST", "/v1/batches/batch_nope/cancel"}} {
			if r := e.call(route[0], route[1], "", nil); r.code != 404 {
				t.Errorf("%v: %d %s", route, r.code, r.body)
			}
		}
	})
}

func TestOpenAIBatchPriority(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.BatchPriority = new(70) })
	f := e.upload("", batchInput)
	var b openaiapi.Batch
	e.call("POST", "/v1/batches", "", `{"input_file_id":"`+f.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`).decode(t, &b)
	if stored, err := e.st.GetBatch(context.Background(), "", b.ID); err != nil || stored.Priority != 70 {
		t.Fatalf("stored: %+v %v", stored, err)
	}
}

// TestOpenAIFilesAndBatchesScoping: a member sees its own files and
// batches, an admin its org's; another org sees none.
func TestOpenAIFilesAndBatchesScoping(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ann := e.token("acme", "ann", jobs.RoleMember)
	bob := e.token("acme", "bob", jobs.RoleMember)
	root := e.token("acme", "root", jobs.RoleAdmin)
	eve := e.token("evil", "eve", jobs.RoleAdmin)

	f := e.upload(ann, batchInput)
	bobs := e.upload(bob, batchInput)
	var b openaiapi.Batch
	e.call("POST", "/v1/batches", ann, `{"input_file_id":"`+f.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`).decode(t, &b)

	for _, c := range []struct {
		token string
		sees  bool
	}{{ann, true}, {root, true}, {bob, false}, {eve, false}} {
		for _, route := range [][2]string{
			{"GET", "/v1/files/" + f.ID}, {"GET", "/v1/files/" + f.ID + "/content"}, {"GET", "/v1/batches/" + b.ID},
		} {
			r := e.call(route[0], route[1], c.token, nil)
			if (r.code == 200) != c.sees || !c.sees && r.code != 404 {
				t.Errorf("%v as %s: %d", route, c.token[:6], r.code)
			}
		}
	}
	count := func(token, path string) int {
		var l struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		e.call("GET", path, token, nil).decode(t, &l)
		return len(l.Data)
	}
	for _, c := range []struct {
		token          string
		files, batches int
	}{{ann, 1, 1}, {bob, 1, 0}, {root, 2, 1}, {eve, 0, 0}} {
		if got := count(c.token, "/v1/files"); got != c.files {
			t.Errorf("files as %s: %d, want %d", c.token[:6], got, c.files)
		}
		if got := count(c.token, "/v1/batches"); got != c.batches {
			t.Errorf("batches as %s: %d, want %d", c.token[:6], got, c.batches)
		}
	}
	// A member's page skips others' files without losing its own.
	var l openaiapi.List[openaiapi.File]
	e.call("GET", "/v1/files?limit=1", ann, nil).decode(t, &l)
	if len(l.Data) != 1 || l.Data[0].ID != f.ID {
		t.Errorf("ann's first page: %+v", l)
	}

	// Nobody else may use, cancel or delete them.
	r := e.call("POST", "/v1/batches", bob, `{"input_file_id":"`+f.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`)
	if r.code != 400 || deref(r.oaErr(t).Param) != "input_file_id" {
		t.Errorf("bob batches ann's file: %d %s", r.code, r.body)
	}
	if r := e.call("POST", "/v1/batches/"+b.ID+"/cancel", bob, nil); r.code != 404 {
		t.Errorf("bob cancels ann's batch: %d", r.code)
	}
	if r := e.call("DELETE", "/v1/files/"+f.ID, eve, nil); r.code != 404 {
		t.Errorf("eve deletes ann's file: %d", r.code)
	}
	if r := e.call("DELETE", "/v1/files/"+bobs.ID, root, nil); r.code != 200 {
		t.Errorf("the admin deletes bob's file: %d", r.code)
	}
}
