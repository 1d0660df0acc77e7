package jobstest

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// newFile stores content as a batch input file of org.
func (f *fixture) newFile(org, name, content string) jobs.File {
	f.t.Helper()
	file, err := f.store.CreateFile(f.ctx, jobs.CreateFileParams{OrgID: org, CreatedBy: "alice",
		Purpose: jobs.PurposeBatch, Filename: name, Content: strings.NewReader(content)})
	if err != nil {
		f.t.Fatalf("CreateFile(%s): %v", name, err)
	}
	return file
}

// content reads a file's content.
func (f *fixture) content(org, id string) []byte {
	f.t.Helper()
	var buf bytes.Buffer
	if err := f.store.ReadFile(f.ctx, org, id, &buf); err != nil {
		f.t.Fatalf("ReadFile(%s): %v", id, err)
	}
	return buf.Bytes()
}

// listFiles pages through ListFiles with limit, checking that every page
// but the last says more follow, and returns the IDs.
func (f *fixture) listFiles(p jobs.FileListParams) []string {
	f.t.Helper()
	var out []string
	for {
		page, more, err := f.store.ListFiles(f.ctx, p)
		if err != nil {
			f.t.Fatalf("ListFiles: %v", err)
		}
		if len(page) > p.Limit {
			f.t.Fatalf("ListFiles: %d files, limit %d", len(page), p.Limit)
		}
		for _, file := range page {
			out = append(out, file.ID)
		}
		if !more {
			return out
		}
		if len(page) != p.Limit {
			f.t.Fatalf("ListFiles: a page of %d (limit %d) says more follow", len(page), p.Limit)
		}
		p.After = page[len(page)-1].ID
	}
}

func sameFile(a, b jobs.File) bool {
	return a.ID == b.ID && a.OrgID == b.OrgID && a.CreatedBy == b.CreatedBy && a.Purpose == b.Purpose &&
		a.Filename == b.Filename && a.Bytes == b.Bytes && a.CreatedAt.Equal(b.CreatedAt)
}

// testFiles checks CreateFile, GetFile, ReadFile and DeleteFile, and
// that each is scoped to the org.
func testFiles(t *testing.T, h Harness) {
	f := setup(t, h)
	now := f.now()
	file := f.newFile("org-a", "in.jsonl", "line one\nline two\n")
	if !strings.HasPrefix(file.ID, "file-") || file.OrgID != "org-a" || file.CreatedBy != "alice" ||
		file.Purpose != jobs.PurposeBatch || file.Filename != "in.jsonl" || file.Bytes != 18 {
		t.Errorf("CreateFile = %+v", file)
	}
	sameTime(t, "file CreatedAt", file.CreatedAt, now)
	for _, org := range []string{"org-a", ""} {
		got, err := f.store.GetFile(f.ctx, org, file.ID)
		if err != nil || !sameFile(got, file) {
			t.Errorf("GetFile(%q) = %+v, %v; want %+v", org, got, err, file)
		}
		if c := f.content(org, file.ID); string(c) != "line one\nline two\n" {
			t.Errorf("ReadFile(%q) = %q", org, c)
		}
	}
	_, err := f.store.GetFile(f.ctx, "org-b", file.ID)
	wantErr(t, err, jobs.ErrNotFound, "GetFile from another org")
	wantErr(t, f.store.ReadFile(f.ctx, "org-b", file.ID, io.Discard), jobs.ErrNotFound, "ReadFile from another org")
	wantErr(t, f.store.DeleteFile(f.ctx, "org-b", file.ID), jobs.ErrNotFound, "DeleteFile from another org")
	if _, err := f.store.GetFile(f.ctx, "org-a", file.ID); err != nil {
		t.Fatalf("the file is gone after another org's DeleteFile: %v", err)
	}
	_, err = f.store.GetFile(f.ctx, "", "file-unknown")
	wantErr(t, err, jobs.ErrNotFound, "GetFile of an unknown ID")

	empty := f.newFile("org-a", "empty.jsonl", "")
	if empty.Bytes != 0 || len(f.content("", empty.ID)) != 0 {
		t.Errorf("an empty file: %+v, content %q", empty, f.content("", empty.ID))
	}

	if err := f.store.DeleteFile(f.ctx, "org-a", file.ID); err != nil {
		t.Fatalf("DeleteFile: %v", err)
	}
	_, err = f.store.GetFile(f.ctx, "", file.ID)
	wantErr(t, err, jobs.ErrNotFound, "GetFile after DeleteFile")
	wantErr(t, f.store.ReadFile(f.ctx, "", file.ID, io.Discard), jobs.ErrNotFound, "ReadFile after DeleteFile")
	wantErr(t, f.store.DeleteFile(f.ctx, "", file.ID), jobs.ErrNotFound, "DeleteFile again")
	if got := f.listFiles(jobs.FileListParams{OrgID: "org-a", Limit: 10}); len(got) != 1 || got[0] != empty.ID {
		t.Errorf("ListFiles after DeleteFile = %v, want only %s", got, empty.ID)
	}

	for _, p := range []jobs.CreateFileParams{
		{Purpose: "batch", Filename: "x", Content: strings.NewReader("x")},
		{OrgID: "o", Filename: "x", Content: strings.NewReader("x")},
		{OrgID: "o", Purpose: "batch", Content: strings.NewReader("x")},
		{OrgID: "o", Purpose: "batch", Filename: "x"},
		{OrgID: "o", Purpose: "batch", Filename: "x", Content: strings.NewReader("x"), MaxBytes: -1},
	} {
		_, err := f.store.CreateFile(f.ctx, p)
		wantNormalizeErr(t, err, p, "CreateFile")
	}
}

// testListFiles checks ListFiles: newest first (ties by ID), paged with
// After, scoped to the org, filtered by purpose.
func testListFiles(t *testing.T, h Harness) {
	f := setup(t, h)
	var want []string // newest first
	for i := range 5 {
		if i != 2 { // two files share a creation time
			f.advance(time.Second)
		}
		want = append([]string{f.newFile("org-a", "a.jsonl", "a").ID}, want...)
	}
	if want[2] < want[3] { // the same time: the larger ID comes first
		want[2], want[3] = want[3], want[2]
	}
	other := f.newFile("org-b", "b.jsonl", "b")
	out, err := f.store.CreateFile(f.ctx, jobs.CreateFileParams{OrgID: "org-a", Purpose: jobs.PurposeBatchOutput,
		Filename: "out.jsonl", Content: strings.NewReader("o")})
	if err != nil {
		t.Fatalf("CreateFile: %v", err)
	}

	for _, limit := range []int{1, 2, 5, 50} {
		got := f.listFiles(jobs.FileListParams{OrgID: "org-a", Purpose: jobs.PurposeBatch, Limit: limit})
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("ListFiles(limit %d) = %v, want %v", limit, got, want)
		}
	}
	if got := f.listFiles(jobs.FileListParams{OrgID: "org-a", Limit: 3}); len(got) != 6 || got[0] != out.ID {
		t.Errorf("ListFiles of every purpose = %v, want %s and then %v", got, out.ID, want)
	}
	if got := f.listFiles(jobs.FileListParams{OrgID: "org-b", Limit: 3}); len(got) != 1 || got[0] != other.ID {
		t.Errorf("ListFiles(org-b) = %v, want [%s]", got, other.ID)
	}
	if got := f.listFiles(jobs.FileListParams{Limit: 100}); len(got) != 7 {
		t.Errorf("ListFiles of every org = %d files, want 7", len(got))
	}
	page, more, err := f.store.ListFiles(f.ctx, jobs.FileListParams{OrgID: "org-a"})
	if err != nil || len(page) != 6 || more {
		t.Errorf("ListFiles with the default limit = %d files, more %v, %v", len(page), more, err)
	}
}

// testFileContent stores content of several chunks, and of exactly one,
// and reads it back byte for byte; a file over its limit, by one byte, in
// its first chunk or a later one, is ErrFileTooLarge and stores nothing;
// so does a reader that fails. None of these refusals makes Check fail.
func testFileContent(t *testing.T, h Harness) {
	f := setup(t, h)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{2*jobs.FileChunkSize + 123, jobs.FileChunkSize} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.UintN(256))
		}
		file, err := f.store.CreateFile(f.ctx, jobs.CreateFileParams{OrgID: "org-a", Purpose: jobs.PurposeBatch,
			Filename: "big.bin", Content: bytes.NewReader(data), MaxBytes: int64(size)})
		if err != nil {
			t.Fatalf("CreateFile(%d bytes): %v", size, err)
		}
		if file.Bytes != int64(size) {
			t.Errorf("CreateFile(%d bytes).Bytes = %d", size, file.Bytes)
		}
		if got := f.content("org-a", file.ID); !bytes.Equal(got, data) {
			t.Errorf("ReadFile of %d bytes returned %d bytes, not the same", size, len(got))
		}
	}
	stored := len(f.listFiles(jobs.FileListParams{Limit: 100}))

	for _, max := range []int64{10, jobs.FileChunkSize + 5} {
		_, err := f.store.CreateFile(f.ctx, jobs.CreateFileParams{OrgID: "org-a", Purpose: jobs.PurposeBatch,
			Filename: "over.jsonl", Content: bytes.NewReader(make([]byte, max+1)), MaxBytes: max})
		wantErr(t, err, jobs.ErrFileTooLarge, "CreateFile one byte over the limit")
	}
	broken := io.MultiReader(bytes.NewReader(make([]byte, jobs.FileChunkSize+1)), failingReader{})
	_, err := f.store.CreateFile(f.ctx, jobs.CreateFileParams{OrgID: "org-a", Purpose: jobs.PurposeBatch,
		Filename: "broken.jsonl", Content: broken})
	if !errors.Is(err, errReader) {
		t.Errorf("CreateFile with a failing reader: %v, want its error", err)
	}
	if got := len(f.listFiles(jobs.FileListParams{Limit: 100})); got != stored {
		t.Errorf("%d files after the refused uploads, want %d", got, stored)
	}
	if err := f.store.Check(f.ctx); err != nil {
		t.Errorf("Check after refused uploads: %v", err)
	}
}

var errReader = errors.New("the upload broke off")

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errReader }
