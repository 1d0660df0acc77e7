// Command promptkit runs prompts, the durable job service (serve, worker)
// and its operator commands, and a fake provider for trying it out. Every
// command lives in internal/cli; see README.md.
package main

import "github.com/promptkit/promptkit/internal/cli"

func main() { cli.Main() }
