// Package schema compares a database's schema version, the newest goose
// migration applied to it, with the newest migration a store embeds: the
// one this build migrates to. Both stores' Check use it.
package schema

import (
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
)

// Latest returns the version of the newest migration in fsys: the largest
// numeric prefix of the .sql files at its root.
func Latest(fsys fs.FS) (int64, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return 0, err
	}
	var latest int64
	for _, name := range names {
		v, err := goose.NumericComponent(name)
		if err != nil {
			return 0, fmt.Errorf("migration %s: %w", name, err)
		}
		latest = max(latest, v)
	}
	if latest == 0 {
		return 0, fmt.Errorf("no migrations")
	}
	return latest, nil
}

// VersionError is a database schema other than the one this build
// migrates to.
type VersionError struct {
	// Have is the database's version, Want this build's.
	Have, Want int64
}

func (e *VersionError) Error() string {
	if e.Have < e.Want {
		return fmt.Sprintf("database schema version %d is older than this build's %d (run promptkit migrate)", e.Have, e.Want)
	}
	return fmt.Sprintf("database schema version %d is newer than this build's %d (a newer promptkit migrated it)", e.Have, e.Want)
}

// Check returns nil when have equals want, and a *VersionError naming
// both otherwise.
func Check(have, want int64) error {
	if have == want {
		return nil
	}
	return &VersionError{Have: have, Want: want}
}
