package providertest_test

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"strings"

	"github.com/promptkit/promptkit/providertest"
)

func ExampleNewServer() {
	srv := providertest.NewServer()
	defer srv.Close()

	// The first request gets the scripted reply, the second the default.
	srv.Enqueue(providertest.Reply("Hello from the script."))

	for range 2 {
		body := `{"model":"gpt-test","messages":[{"role":"user","content":"Say hello"}]}`
		resp, err := http.Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			log.Fatal(err)
		}
		var out struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(out.Choices[0].Message.Content)
	}
	fmt.Println("requests:", srv.Count())
	// Output:
	// Hello from the script.
	// Fake provider reply: Say hello
	// requests: 2
}
