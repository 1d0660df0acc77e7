// Package pgtest gives tests a PostgreSQL schema of their own on the
// database named by PROMPTKIT_TEST_DATABASE_URL.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable holding the test database URL.
const EnvURL = "PROMPTKIT_TEST_DATABASE_URL"

// BaseURL returns the test database URL, or skips the test with a
// one-line reason when it is not set.
func BaseURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		t.Skip(EnvURL + " not set: skipping PostgreSQL tests")
	}
	return u
}

// Schema creates a schema with a random name, drops it when the test
// ends, and returns the test URL with search_path set to it, so each test
// gets an empty database of its own. It skips like BaseURL.
func Schema(t testing.TB) string {
	t.Helper()
	base := BaseURL(t)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	schema := pgx.Identifier{"pkt_" + hex.EncodeToString(b[:])}.Sanitize()
	exec := func(sql string) error {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(`CREATE SCHEMA ` + schema); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		if err := exec(`DROP SCHEMA ` + schema + ` CASCADE`); err != nil {
			t.Errorf("pgtest: drop schema: %v", err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("pgtest: parse %s: %v", EnvURL, err)
	}
	q := u.Query()
	q.Set("search_path", schema[1:len(schema)-1]) // unquoted: a plain name
	u.RawQuery = q.Encode()
	return u.String()
}
