package cli

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/providertest"
)

// The fake provider answers /v1/embeddings deterministically, honouring
// dimensions. (Its limiter's handling of embeddings is providertest's,
// tested there on a fake clock.)
func TestFakeProviderEmbeddings(t *testing.T) {
	t.Parallel()
	url := startFakeProvider(t)
	post := func() *http.Response {
		t.Helper()
		resp, err := http.Post(url+"/embeddings", "application/json", strings.NewReader(`{"model":"m","input":["a b","c"],"dimensions":4}`))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	var got struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
		Usage struct{ PromptTokens, TotalTokens int } `json:"usage"`
	}
	resp := post()
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 || len(got.Data) != 2 {
		t.Fatalf("%d %+v %v", resp.StatusCode, got, err)
	}
	for i, text := range []string{"a b", "c"} {
		if d := got.Data[i]; d.Index != i || !reflect.DeepEqual(d.Embedding, providertest.EmbeddingFor(text, 4)) {
			t.Errorf("data[%d] %+v", i, d)
		}
	}
}
