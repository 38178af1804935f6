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
