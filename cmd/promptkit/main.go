// Command promptkit runs prompts, the durable job service (serve, worker)
// and its operator commands, and a fake provider for trying it out. Every
// command lives in cmd/promptkit/internal/cli; see README.md.
package main

import "github.com/promptkit/promptkit/cmd/promptkit/internal/cli"

func main() { cli.Main() }
