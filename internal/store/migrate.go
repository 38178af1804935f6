package store

import (
	"context"
	"embed"
	_ "embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/migration_lock.sql
	migrationLockSQL string
	//go:embed sql/migration_record.sql
	migrationRecordSQL string
	//go:embed sql/migration_table.sql
	migrationTableSQL string
	//go:embed sql/migration_versions.sql
	migrationVersionsSQL string
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the advisory lock key held while migrating, so that two
// coordinators starting together apply each migration once.
const migrationLock = 0x6661697277617901 // "fairway" + 1

// Migrate applies the embedded migrations that the database lacks, in
// order, under an advisory lock. It returns the versions it applied.
func (s *Store) Migrate(ctx context.Context) ([]int, error) {
	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	if err := checkMigrationNames(files); err != nil {
		return nil, err
	}
	var applied []int
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, migrationLockSQL, int64(migrationLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, migrationTableSQL); err != nil {
			return err
		}
		done := map[int]bool{}
		rows, err := tx.Query(ctx, migrationVersionsSQL)
		if err != nil {
			return err
		}
		versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return err
		}
		for _, v := range versions {
			done[v] = true
		}
		for _, file := range files {
			name := strings.TrimPrefix(file, "migrations/")
			version, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
			if err != nil {
				return fmt.Errorf("migration %s: name must start with a number", name)
			}
			if done[version] {
				continue
			}
			sql, err := migrations.ReadFile(file)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, string(sql)); err != nil {
				return fmt.Errorf("migration %s: %w", name, interpretError(err))
			}
			if _, err := tx.Exec(ctx, migrationRecordSQL, version, name); err != nil {
				return err
			}
			applied = append(applied, version)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("migrating the database: %w", err)
	}
	return applied, nil
}

// checkMigrationNames refuses two migrations with one number (two branches
// that each added the next one): the second would fail half-way otherwise.
func checkMigrationNames(files []string) error {
	seen := map[int]string{}
	for _, file := range files {
		name := strings.TrimPrefix(file, "migrations/")
		version, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("migration %s: name must start with a number", name)
		}
		if other, dup := seen[version]; dup {
			return fmt.Errorf("migrations %s and %s have the same number: renumber one", other, name)
		}
		seen[version] = name
	}
	return nil
}
