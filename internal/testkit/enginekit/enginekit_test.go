package enginekit_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/simulate"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/providertest"
)

func TestSimulated(t *testing.T) {
	t.Parallel()
	eng := enginekit.Simulated(t, enginekit.Profiles("a", "b"))
	if got := eng.Profiles(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("profiles %v", got)
	}
	res, err := eng.Run(context.Background(), promptkit.RunRequest{ProfileID: "b", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Text, "hello") || res.Model != simulate.Model {
		t.Fatalf("answer %q from %q", res.Text, res.Model)
	}
}

func TestProvider(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	srv.Enqueue(providertest.Status(503), providertest.Reply("scripted"))
	eng := enginekit.Provider(t, srv.URL, enginekit.Retries(0))
	if _, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x"}); err == nil {
		t.Fatal("a 503 succeeded with no retries")
	}
	res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x"})
	if err != nil || res.Text != "scripted" {
		t.Fatalf("answer %+v, %v", res, err)
	}
	if r := srv.Requests(); len(r) != 2 || r[1].Model != enginekit.Model {
		t.Fatalf("provider saw %d requests: %+v", len(r), r)
	}
}
