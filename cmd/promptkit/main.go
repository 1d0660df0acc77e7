// Command promptkit runs prompts, serves a fake provider and (later) runs
// the durable job service. See README.md.
package main

import "github.com/promptkit/promptkit/internal/cli"

func main() { cli.Main() }
