package promptkit_test

import (
	"context"
	"fmt"
	"math"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

// Embeddings of two texts, against a fake provider whose vectors are
// derived from the texts. The call is paced, permitted and retried like a
// run; usage tells what the provider reported from what it did not.
func ExampleEngine_Embed() {
	srv := providertest.NewServer()
	defer srv.Close()

	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: srv.URL, MaxActive: 4}},
		Profiles: []promptkit.Profile{{ID: "embed", Backend: "local", Model: "text-embedding-3-small"}},
	})
	if err != nil {
		panic(err)
	}
	res, err := eng.Embed(context.Background(), promptkit.EmbedRequest{
		Input:      []string{"The cat sat on the mat.", "A cat was sitting on a mat."},
		Dimensions: new(8),
	})
	if err != nil {
		panic(err)
	}
	a, b := res.Embeddings[0], res.Embeddings[1]
	var dot float64
	for i := range a {
		dot += a[i] * b[i]
	}
	fmt.Println(len(res.Embeddings), len(a), res.Model)
	fmt.Println("similarity in [-1, 1]:", math.Abs(dot) <= 1+1e-9)
	fmt.Println("prompt tokens:", res.Usage.PromptTokens, res.Usage.Known.PromptTokens, "completion tokens known:", res.Usage.Known.CompletionTokens)
	// Output:
	// 2 8 text-embedding-3-small
	// similarity in [-1, 1]: true
	// prompt tokens: 13 true completion tokens known: false
}
