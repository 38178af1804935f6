package store_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/fairwayhq/fairway/internal/store"
	"github.com/stretchr/testify/require"
)

// TestMigrationNumbersAreUnique: every embedded migration has a number of
// its own (two branches adding "the next one" collide at merge).
func TestMigrationNumbersAreUnique(t *testing.T) {
	files, err := fs.Glob(os.DirFS("."), "migrations/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	require.NoError(t, store.CheckMigrationNames(files))
	require.ErrorContains(t, store.CheckMigrationNames([]string{"migrations/005_a.sql", "migrations/005_b.sql"}), "have the same number")
	require.Error(t, store.CheckMigrationNames([]string{filepath.Join("migrations", "x.sql")}))
}
