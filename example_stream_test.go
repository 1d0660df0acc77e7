package promptkit_test

import (
	"context"
	"fmt"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

// OnDelta receives the answer piece by piece as the backend generates
// it; the result is the whole answer, as without it.
func ExampleEngine_Run_stream() {
	srv := providertest.NewServer()
	defer srv.Close()
	srv.Enqueue(providertest.Reply("Paris is the capital of France."))

	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: srv.URL}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "local", Model: "some-model"}},
	})
	if err != nil {
		panic(err)
	}
	res, err := eng.Run(context.Background(), promptkit.RunRequest{
		Text: "What is the capital of France?",
		// Called on the run's goroutine as each piece arrives: keep it quick.
		OnDelta: func(d promptkit.StreamDelta) {
			fmt.Printf("generation %d, attempt %d, piece %d: %q\n", d.Generation, d.Attempt, d.Index, d.Text)
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Text)
	// Output:
	// generation 1, attempt 1, piece 0: "Paris "
	// generation 1, attempt 1, piece 1: "is "
	// generation 1, attempt 1, piece 2: "the "
	// generation 1, attempt 1, piece 3: "capital "
	// generation 1, attempt 1, piece 4: "of "
	// generation 1, attempt 1, piece 5: "France."
	// Paris is the capital of France.
}
