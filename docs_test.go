package fairway_test

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/fairwayhq/fairway/internal/cli"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// docFiles returns README.md and docs/*.md, relative to the module root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	return append([]string{"README.md"}, files...)
}

// markdownLink matches [text](target) and ![alt](target); the target ends
// at the first space or closing parenthesis.
var markdownLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// inlineCode matches `code` spans, whose text is no link.
var inlineCode = regexp.MustCompile("`[^`]*`")

// TestDocsLinksResolve checks that every relative link in the README and
// docs/ names a file of the repository and, for a Markdown file, one of its
// headings when it has an #anchor.
func TestDocsLinksResolve(t *testing.T) {
	for _, file := range docFiles(t) {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, l := range links(string(data)) {
			target := l.target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			name, anchor, _ := strings.Cut(target, "#")
			resolved := file // a bare #anchor is in the same file
			if name != "" {
				resolved = path.Clean(path.Join(path.Dir(file), name))
			}
			if strings.HasPrefix(resolved, "../") {
				t.Errorf("%s:%d: link %q leaves the repository", file, l.line, target)
				continue
			}
			if _, err := os.Stat(resolved); err != nil {
				t.Errorf("%s:%d: link %q: %s does not exist", file, l.line, target, resolved)
				continue
			}
			if anchor == "" || !strings.HasSuffix(resolved, ".md") {
				continue
			}
			doc, err := os.ReadFile(resolved)
			require.NoError(t, err)
			if !headingAnchors(string(doc))[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", file, l.line, target, resolved, anchor)
			}
		}
	}
}

type link struct {
	line   int
	target string
}

// links returns the links of a Markdown text outside code blocks and code
// spans.
func links(text string) []link {
	var out []link
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		line = inlineCode.ReplaceAllString(line, "")
		for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{line: i + 1, target: m[1]})
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives a text's headings:
// lower case, punctuation dropped, spaces as hyphens, and -1, -2… after
// repeats.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(heading) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

// TestDocsConfigurationCoversEveryKey checks that docs/configuration.md
// has a row for every key of internal/config/keys.go, with its flag.
func TestDocsConfigurationCoversEveryKey(t *testing.T) {
	src, err := os.ReadFile("internal/config/keys.go")
	require.NoError(t, err)
	doc, err := os.ReadFile("docs/configuration.md")
	require.NoError(t, err)
	keys := regexp.MustCompile(`\{name: "([^"]+)", flag: "([^"]*)"`).FindAllStringSubmatch(string(src), -1)
	require.NotEmpty(t, keys, "no keys found in internal/config/keys.go: has its table changed shape?")
	for _, k := range keys {
		require.Contains(t, string(doc), "`"+k[1]+"`", "docs/configuration.md does not document the key %s", k[1])
		if k[2] != "" {
			require.Contains(t, string(doc), "`--"+k[2]+"`", "docs/configuration.md does not give the flag --%s of %s", k[2], k[1])
		}
	}
}

// TestDocsGoSnippetIsTheExample checks that the first Go snippet of
// docs/go-api.md is the body of Example in example_test.go, which the
// tests compile, so that the snippet stays in step with the API.
func TestDocsGoSnippetIsTheExample(t *testing.T) {
	doc, err := os.ReadFile("docs/go-api.md")
	require.NoError(t, err)
	_, snippet, ok := strings.Cut(string(doc), "```go\n")
	require.True(t, ok, "docs/go-api.md has no Go snippet")
	snippet, _, _ = strings.Cut(snippet, "```")

	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	_, body, ok := strings.Cut(string(src), "func Example() {\n")
	require.True(t, ok, "example_test.go has no func Example")
	body, _, _ = strings.Cut(body, "\n}\n")
	lines := strings.Split(body, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "\t")
	}
	require.Equal(t, strings.TrimSpace(strings.Join(lines, "\n")), strings.TrimSpace(snippet),
		"docs/go-api.md's snippet differs from Example in example_test.go: copy the body over")
}

// TestDocsCommandFlagsExist checks that every flag the README and docs/
// give a fairway command, in a code span or a code block (`fairway
// executor --max-concurrent sleep=2`), exists on that command, and that
// every flag docs/configuration.md gives a key exists on some command: a
// documented flag that answers "unknown flag" is a bug of the docs or of
// the command line.
// removedBenchFlags are flags 'fairway bench' had, which the dated
// measures of docs/performance.md name as their day's binary took them,
// and when they went.
var removedBenchFlags = map[string]string{
	"engine":         "2026-11-30: the row engine was removed; the journal is the only engine",
	"journal-mirror": "2026-11-30: with the row engine",
}

func TestDocsCommandFlagsExist(t *testing.T) {
	root := cli.Command()
	checked := 0
	for _, file := range docFiles(t) {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, c := range commandLines(string(data)) {
			for _, inv := range fairwayInvocations(c.text) {
				for cmd, flags := range resolveCommands(root, append(inv, c.rowFlags...)) {
					for _, flag := range flags {
						checked++
						if _, ok := removedBenchFlags[flag]; ok && filepath.Base(file) == "performance.md" && cmd.Name() == "bench" {
							continue // a dated measure names the flag its day's binary had
						}
						if !hasFlag(cmd, flag) {
							t.Errorf("%s:%d: %q names --%s, which '%s' does not have (see '%s --help')", file, c.line, c.text, flag, cmd.CommandPath(), cmd.CommandPath())
						}
					}
				}
			}
		}
	}
	require.Greater(t, checked, 100, "found few flags in the docs: has the extraction stopped working?")

	// Every key's flag in configuration.md's table exists on a command.
	doc, err := os.ReadFile("docs/configuration.md")
	require.NoError(t, err)
	all := map[string][]string{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { all[f.Name] = append(all[f.Name], c.CommandPath()) })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	rows := 0
	for i, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		for _, m := range inlineCode.FindAllString(cells[2], -1) {
			flag, ok := strings.CutPrefix(strings.Trim(m, "`"), "--")
			if !ok {
				continue
			}
			rows++
			if len(all[flag]) == 0 {
				t.Errorf("docs/configuration.md:%d: the flag --%s of %s exists on no command", i+1, flag, strings.TrimSpace(cells[1]))
			}
		}
	}
	require.Greater(t, rows, 50, "found few key flags in docs/configuration.md: has its table changed shape?")
}

// commandLine is a code block's line, or a code span, of a Markdown text.
// A code span that opens a table row may have the flags that the row's
// other code spans give (`--pool-size`, `--max-concurrent sleep=2`).
type commandLine struct {
	line     int
	text     string
	rowFlags []string
}

// commandLines returns the lines of a text's code blocks (a line ending in
// a backslash joined with the next) and its code spans (within a
// paragraph, which a span may cross; "\|" in a table is "|").
func commandLines(text string) []commandLine {
	var out []commandLine
	fenced := false
	var para []string
	paraStart := 0
	flush := func() {
		for _, m := range inlineCode.FindAllString(strings.Join(para, " "), -1) {
			out = append(out, commandLine{line: paraStart, text: strings.ReplaceAll(strings.Trim(m, "`"), `\|`, "|")})
		}
		para = nil
	}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			flush()
			fenced = !fenced
			continue
		}
		if fenced {
			start := i
			for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
				i++
				line = strings.TrimSuffix(line, "\\") + " " + lines[i]
			}
			out = append(out, commandLine{line: start + 1, text: line})
			continue
		}
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if strings.HasPrefix(line, "| `") {
			// A table row: its first cell's spans, then the others'; the
			// first span gets the flags of the rest of the row.
			flush()
			first := len(out)
			para, paraStart = []string{line}, i+1
			flush()
			if len(out) > first {
				for _, c := range out[first+1:] {
					if strings.HasPrefix(c.text, "--") {
						out[first].rowFlags = append(out[first].rowFlags, strings.Fields(c.text)[0])
					}
				}
			}
			continue
		}
		if len(para) == 0 {
			paraStart = i + 1
		}
		para = append(para, line)
	}
	flush()
	return out
}

// fairwayInvocations splits a command line into shell words and returns
// the words after each "fairway" (or "…/fairway", as in go run
// ./cmd/fairway) up to the end of that command: a pipe, a ;, &&, ||, a
// redirection or a comment.
func fairwayInvocations(line string) [][]string {
	words := shellWords(line)
	var out [][]string
	for i, w := range words {
		if w != "fairway" && !strings.HasSuffix(w, "/fairway") {
			continue
		}
		if i > 0 && words[i-1] == "-m" {
			continue // python -m fairway: the Python package's command line
		}
		var inv []string
		for _, a := range words[i+1:] {
			if a == "|" || a == ";" || a == "&&" || a == "||" || a == "&" || strings.HasPrefix(a, "#") || strings.HasPrefix(a, ">") || strings.HasPrefix(a, "2>") {
				break
			}
			inv = append(inv, a)
		}
		out = append(out, inv)
	}
	return out
}

// shellWords splits s at blanks outside quotes, and drops the quotes.
func shellWords(s string) []string {
	var words []string
	var b strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			b.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case unicode.IsSpace(r):
			if inWord {
				words = append(words, b.String())
				b.Reset()
				inWord = false
			}
		default:
			b.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, b.String())
	}
	return words
}

// resolveCommands follows the leading words of args that name
// subcommands ("show|logs" names two) and returns each command reached
// with the names of the --flags given to it.
func resolveCommands(root *cobra.Command, args []string) map[*cobra.Command][]string {
	cmds := []*cobra.Command{root}
	i := 0
	for ; i < len(args); i++ {
		var next []*cobra.Command
		for _, cmd := range cmds {
			for _, name := range strings.Split(args[i], "|") {
				for _, sub := range cmd.Commands() {
					if sub.Name() == name || sub.HasAlias(name) {
						next = append(next, sub)
					}
				}
			}
		}
		if len(next) == 0 || len(next) < len(cmds)*len(strings.Split(args[i], "|")) {
			break // not (only) subcommands: the first argument
		}
		cmds = next
	}
	var flags []string
	for _, a := range args[i:] {
		if m := flagName.FindStringSubmatch(a); m != nil {
			flags = append(flags, m[1])
		}
	}
	out := map[*cobra.Command][]string{}
	for _, cmd := range cmds {
		out[cmd] = flags
	}
	return out
}

// flagName matches a --flag (--flag=value, --flag] in a synopsis).
var flagName = regexp.MustCompile(`^--([a-z][a-z0-9-]*)`)

// hasFlag says whether cmd takes --name, its own or inherited, --help and
// --version included.
func hasFlag(cmd *cobra.Command, name string) bool {
	cmd.InitDefaultHelpFlag()
	cmd.InitDefaultVersionFlag()
	return cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil
}
