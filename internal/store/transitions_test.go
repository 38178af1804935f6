package store_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"

	"github.com/stretchr/testify/require"
)

// TestEventsAreWrittenInSQLFiles: every statement that writes an event
// lives in sql/ (the one home for state changes), none inline in Go.
func TestEventsAreWrittenInSQLFiles(t *testing.T) {
	goFiles, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range goFiles {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NotContains(t, string(data), "INSERT INTO fairway_event", "%s writes events inline: move the statement to sql/", f)
	}
	sqlFiles, err := filepath.Glob("sql/*.sql")
	require.NoError(t, err)
	writers := 0
	for _, f := range sqlFiles {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		if strings.Contains(string(data), "INSERT INTO fairway_event") {
			writers++
		}
	}
	require.GreaterOrEqual(t, writers, 2, "the statements that write events (rejections, periodic tasks; the journal's leader publishes the rest)")
}

// sqlStart is how a string literal holding an SQL statement starts.
var sqlStart = regexp.MustCompile(`(?is)^\s*(SELECT|UPDATE|INSERT|DELETE|WITH|CREATE|ALTER|DROP|ANALYZE)\b`)

// TestSQLLivesInSQLFiles: the store's statements are files in sql/, read
// with go:embed, so that they can be read, diffed and explained on their
// own. The only SQL left in Go is composed with the shared column lists
// (job_columns.sql and periodicColumns): pieces of a statement joined by +.
// The public package store wraps this one and holds no SQL either; and the
// tools (internal/bench, internal/chaos) reach Fairway's tables only
// through the store's methods, so that a schema change breaks this
// package's tests, not silently a tool: they may send SQL of their own
// (CREATE DATABASE, PostgreSQL's own views) but none naming a fairway_
// table.
func TestSQLLivesInSQLFiles(t *testing.T) {
	any := func(string) bool { return true }
	require.Empty(t, inlineSQL(t, ".", any), "SQL statements inline in Go: move each to a file in sql/ and embed it")
	require.Empty(t, inlineSQL(t, "../../store", any), "SQL statements in the public store: it wraps internal/store")
	fairwayTable := regexp.MustCompile(`\bfairway_[a-z_]+\b`)
	for _, tool := range []string{"../bench", "../chaos"} {
		require.Empty(t, inlineSQL(t, tool, fairwayTable.MatchString), "%s sends SQL on Fairway's tables: give the store a method (SQL in sql/) and call it", tool)
	}
}

// inlineSQL lists the string literals of dir's Go files (not its tests)
// that hold an SQL statement that match says is one to report, leaving out
// the pieces of statements composed with +.
func inlineSQL(t *testing.T, dir string, match func(string) bool) []string {
	goFiles, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, goFiles, dir)
	fset := token.NewFileSet()
	var inline []string
	for _, f := range goFiles {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		composed := map[*ast.BasicLit]bool{}
		ast.Inspect(file, func(n ast.Node) bool {
			if b, ok := n.(*ast.BinaryExpr); ok && b.Op == token.ADD {
				for _, e := range []ast.Expr{b.X, b.Y} {
					if l, ok := e.(*ast.BasicLit); ok {
						composed[l] = true
					}
				}
			}
			return true
		})
		ast.Inspect(file, func(n ast.Node) bool {
			l, ok := n.(*ast.BasicLit)
			if !ok || l.Kind != token.STRING || composed[l] {
				return true
			}
			if s, err := strconv.Unquote(l.Value); err == nil && sqlStart.MatchString(s) && match(s) {
				inline = append(inline, fset.Position(l.Pos()).String())
			}
			return true
		})
	}
	return inline
}
