// Package benchkit holds the small helpers the comparison programs share.
package benchkit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// WithSearchPath returns the PostgreSQL URL raw with its search_path set
// to schema, or an error for a URL that does not parse.
func WithSearchPath(raw, schema string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Loopback reports whether the URL raw names a loopback host: the
// programs run only against databases on this machine.
func Loopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	h := u.Hostname()
	return h == "localhost" || h == "::1" || strings.HasPrefix(h, "127.")
}

// SplitList splits a comma-separated flag value, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// NewSchema creates a fresh PostgreSQL schema named prefix_pid_random at
// pgURL; drop removes it.
func NewSchema(ctx context.Context, pgURL, prefix string) (name string, drop func() error, err error) {
	name = fmt.Sprintf("%s_%d_%08x", prefix, os.Getpid(), rand.Uint32())
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, err
	}
	drop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, pgURL)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		return err
	}
	return name, drop, nil
}

// DropLeftovers removes the schemas NewSchema made with these prefixes
// that an interrupted earlier run left behind.
func DropLeftovers(ctx context.Context, pgURL string, prefixes ...string) error {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, p := range prefixes {
		rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)`, p+"_")
		if err != nil {
			return err
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, n := range names {
			if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{n}.Sanitize()+" CASCADE"); err != nil {
				return err
			}
		}
	}
	return nil
}
