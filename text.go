package fairway

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// PostgreSQL stores text and jsonb in UTF-8 and refuses some values that Go
// and JSON accept: a NUL character (in text, and as \u0000 in jsonb), bytes
// that are not UTF-8, and, in jsonb, a \u escape of half a UTF-16 surrogate
// pair. Untrusted input is checked for them before it reaches the database,
// so that the client gets "invalid" naming the field rather than an internal
// error carrying PostgreSQL's text.

// CheckText refuses a string that PostgreSQL cannot store in a text column:
// one with a NUL character or with bytes that are not UTF-8.
func CheckText(field, v string) error {
	if strings.IndexByte(v, 0) >= 0 {
		return Invalid(field, "contains a NUL character, which cannot be stored")
	}
	if !utf8.ValidString(v) {
		return Invalid(field, "is not valid UTF-8")
	}
	return nil
}

// CheckJSONText refuses a JSON document with a string or object key that
// PostgreSQL cannot store (see CheckText; in raw JSON also an escaped
// \u0000 or half a surrogate pair). The error names the top-level field that
// holds the bad string, and says where in it if it is deeper. A document
// that is not valid JSON is not checked: decoding it reports that.
func CheckJSONText(data []byte) error {
	if err := checkJSONText(data, ""); err != nil {
		return err
	}
	return nil
}

// checkJSONText is CheckJSONText for a document found at path root ("" for
// a whole body).
func checkJSONText(data []byte, root string) *Error {
	if badRawText(data) == "" && !hasBadNumber(data) {
		return nil
	}
	return findBadText(data, root)
}

// PostgreSQL's numeric type, which jsonb stores numbers in, holds at most
// 131072 digits before the decimal point and 16383 after it; a JSON number
// beyond that (1e1000000, say) makes it refuse the whole statement.
const (
	maxNumericIntDigits  = 131072
	maxNumericFracDigits = 16383
)

// numberProblem is the text of the error about a JSON number PostgreSQL
// cannot store.
const numberProblem = "is a number out of range (PostgreSQL stores at most 131072 digits before the decimal point and 16383 after it)"

// hasBadNumber says whether raw JSON holds a number, outside strings, that
// PostgreSQL's numeric type cannot hold. One pass over the bytes; numbers
// of fewer than 6 characters are always fine.
func hasBadNumber(data []byte) bool {
	inString := false
	for i := 0; i < len(data); i++ {
		b := data[i]
		if inString {
			switch b {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		if b == '"' {
			inString = true
			continue
		}
		if b != '-' && (b < '0' || b > '9') {
			continue
		}
		j := i
		for j < len(data) && (data[j] >= '0' && data[j] <= '9' || strings.IndexByte("+-.eE", data[j]) >= 0) {
			j++
		}
		if j-i > 5 && !numberFits(data[i:j]) {
			return true
		}
		i = j - 1
	}
	return false
}

// numberFits says whether PostgreSQL's numeric type holds the JSON number
// lit: its leading digit at most 131071 places before the decimal point,
// its scale (digits after the point, as written) at most 16383.
func numberFits(lit []byte) bool {
	s := strings.TrimPrefix(string(lit), "-")
	mant, exp, hasExp := strings.Cut(s, "e")
	if !hasExp {
		mant, exp, hasExp = strings.Cut(s, "E")
	}
	e := int64(0)
	if hasExp {
		n, err := strconv.ParseInt(strings.TrimPrefix(exp, "+"), 10, 64)
		if err != nil || n >= 1<<30 || n <= -(1<<30) {
			return false // PostgreSQL refuses such exponents whatever the digits
		}
		e = n
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if max(int64(len(frac))-e, 0) > maxNumericFracDigits {
		return false
	}
	// The place of the leading non-zero digit: 0 for units, -1 for tenths.
	lead := int64(0)
	if k := strings.IndexFunc(intPart, func(r rune) bool { return r != '0' }); k >= 0 {
		lead = int64(len(intPart)-k-1) + e
	} else if k := strings.IndexFunc(frac, func(r rune) bool { return r != '0' }); k >= 0 {
		lead = -int64(k+1) + e
	} else {
		return true // zero
	}
	return lead < maxNumericIntDigits
}

// badRawText says what is wrong with raw JSON text: "" when nothing is.
// Escapes only occur inside strings of valid JSON, so the whole document
// can be scanned at once.
func badRawText(data []byte) string {
	if bytes.IndexByte(data, 0) >= 0 {
		return "contains a NUL character, which cannot be stored"
	}
	if !utf8.Valid(data) {
		return "is not valid UTF-8"
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' || i+1 >= len(data) {
			continue
		}
		i++ // the escaped character
		if data[i] != 'u' {
			continue
		}
		r, ok := hex4(data, i+1)
		if !ok {
			continue // a syntax error: decoding reports it
		}
		i += 4
		switch {
		case r == 0:
			return `contains a NUL character (\u0000), which cannot be stored`
		case r >= 0xDC00 && r <= 0xDFFF:
			return "contains half a UTF-16 surrogate pair (a \\u escape of a low surrogate without a high one), which is not valid Unicode"
		case r >= 0xD800 && r <= 0xDBFF:
			if i+2 < len(data) && data[i+1] == '\\' && data[i+2] == 'u' {
				if low, ok := hex4(data, i+3); ok && low >= 0xDC00 && low <= 0xDFFF {
					i += 6
					continue
				}
			}
			return "contains half a UTF-16 surrogate pair (a \\u escape of a high surrogate without a low one), which is not valid Unicode"
		}
	}
	return ""
}

// hex4 reads the four hex digits of a \u escape at data[i:].
func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(data[i:i+4]), 16, 16)
	return rune(n), err == nil
}

// findBadText walks a JSON document whose raw text badRawText refused, to
// name the string at fault.
func findBadText(data []byte, root string) *Error {
	type frame struct {
		object  bool
		wantKey bool   // an object's next token is a key (or its end)
		key     string // an object's current key
		index   int    // an array's current element
	}
	var stack []frame
	path := func() string {
		var b strings.Builder
		b.WriteString(root)
		for _, f := range stack {
			switch {
			case f.object && f.wantKey: // between keys
			case !f.object:
				fmt.Fprintf(&b, "[%d]", f.index)
			case b.Len() > 0 && plainKey.MatchString(f.key):
				b.WriteString("." + f.key)
			case b.Len() == 0 && plainKey.MatchString(f.key):
				b.WriteString(f.key)
			default:
				fmt.Fprintf(&b, "[%q]", strings.ToValidUTF8(f.key, "\uFFFD"))
			}
		}
		return b.String()
	}
	fail := func(where, problem string) *Error {
		field := root
		if field == "" && len(stack) > 0 && stack[0].object && !stack[0].wantKey {
			field = stack[0].key
		}
		if field == "" {
			field = "body"
		}
		if where == field {
			return Invalid(field, "%s", problem)
		}
		return Invalid(field, "%s %s", where, problem)
	}
	done := func() { // a value ended: the container moves on
		if n := len(stack); n > 0 {
			if stack[n-1].object {
				stack[n-1].wantKey = true
			} else {
				stack[n-1].index++
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var prev int64
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		// The token's raw text, with the separators and spaces before it,
		// which are ASCII.
		raw := data[prev:dec.InputOffset()]
		prev = dec.InputOffset()
		var top *frame
		if n := len(stack); n > 0 {
			top = &stack[n-1]
		}
		if top != nil && top.object && top.wantKey {
			key, ok := tok.(string)
			if !ok { // '}'
				stack = stack[:len(stack)-1]
				done()
				continue
			}
			if problem := badRawText(raw); problem != "" {
				where := path()
				if where == "" {
					where = "the body"
				}
				return fail(where, "has a key that "+problem)
			}
			top.key, top.wantKey = key, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, wantKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, frame{})
			continue
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			done()
			continue
		}
		switch tok := tok.(type) {
		case string:
			if problem := badRawText(raw); problem != "" {
				return fail(path(), problem)
			}
		case json.Number:
			if !numberFits([]byte(tok)) {
				return fail(path(), numberProblem)
			}
		}
		done()
	}
	// Not found (the document is not valid JSON past some point): name the
	// root at least.
	stack = nil
	return fail(cmp.Or(root, "the body"), cmp.Or(badRawText(data), "has a number out of range"))
}

// plainKey matches the object keys shown as .key in a path.
var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// CleanText returns s with every NUL character and every byte that is not
// UTF-8 replaced by U+FFFD, for text that must be stored rather than
// refused (an executor's error message, say).
func CleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// CleanJSON returns a JSON document that CheckJSONText refuses made
// storable: its strings and keys passed through CleanText, and each number
// PostgreSQL's numeric cannot hold (1e170000, say) turned into a string of
// its digits, re-encoded. A document it accepts, or one that is not valid
// JSON, is returned as it is.
func CleanJSON(data json.RawMessage) json.RawMessage {
	if badRawText(data) == "" && !hasBadNumber(data) {
		return data
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return data
	}
	out, err := json.Marshal(cleanValue(v))
	if err != nil {
		return data
	}
	return out
}

func cleanValue(v any) any {
	switch v := v.(type) {
	case string:
		return CleanText(v)
	case json.Number:
		if !numberFits([]byte(v)) {
			return string(v)
		}
	case []any:
		for i := range v {
			v[i] = cleanValue(v[i])
		}
	case map[string]any:
		clean := make(map[string]any, len(v))
		for k, e := range v {
			clean[CleanText(k)] = cleanValue(e)
		}
		return clean
	}
	return v
}

// MaxErrorTextSize caps the error text an event or a rejection carries
// (4 KiB); longer text is cut, with a marker saying so.
const MaxErrorTextSize = 4 << 10

// truncatedMarker ends text that TruncateBytes or TruncateRunes cut.
const truncatedMarker = "…[truncated]"

// TruncateBytes returns s cut to at most max bytes (on a character
// boundary), the cut marked, with NUL characters and bytes that are not
// UTF-8 replaced as CleanText does: for untrusted text that goes into an
// event, a rejection or a log line.
func TruncateBytes(s string, limit int) string {
	s = CleanText(s)
	if len(s) <= limit {
		return s
	}
	cut := max(limit-len(truncatedMarker), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + truncatedMarker
}

// TruncateRunes is TruncateBytes counting characters rather than bytes
// (job ids, group and task names).
func TruncateRunes(s string, limit int) string {
	s = CleanText(s)
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	keep, n := max(limit-utf8.RuneCountInString(truncatedMarker), 0), 0
	for i := range s {
		if n == keep {
			return s[:i] + truncatedMarker
		}
		n++
	}
	return s
}
