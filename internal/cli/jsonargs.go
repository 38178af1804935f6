package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// maxArgsFile bounds what --args reads from a file or stdin: well above
// what a coordinator accepts (1 MiB by default), so that its refusal, not
// this one, names the limit.
const maxArgsFile = 64 << 20

// jsonArgs reads the value of an --args flag: a JSON object given inline,
// from a file (@path) or from stdin (-), as curl's --data does. What does
// not parse is a usage error naming the flag and the byte where it breaks;
// a JSON value other than an object is one too. "" is no arguments.
func jsonArgs(cmd *cobra.Command, flag, value string) (json.RawMessage, error) {
	var data []byte
	var from string
	switch {
	case value == "":
		return nil, nil
	case value == "-":
		b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxArgsFile+1))
		if err != nil {
			return nil, fmt.Errorf("--%s -: reading stdin: %w", flag, err)
		}
		data, from = b, " (stdin)"
	case strings.HasPrefix(value, "@"):
		f, err := os.Open(value[1:])
		if err != nil {
			return nil, usageError{fmt.Errorf("--%s %s: %w", flag, value, errors.Unwrap(err))}
		}
		defer func() { _ = f.Close() }()
		if data, err = io.ReadAll(io.LimitReader(f, maxArgsFile+1)); err != nil {
			return nil, fmt.Errorf("--%s %s: %w", flag, value, err)
		}
		from = " (" + value[1:] + ")"
	default:
		data = []byte(value)
	}
	if len(data) > maxArgsFile {
		return nil, usageError{fmt.Errorf("--%s%s: more than %d MiB", flag, from, maxArgsFile>>20)}
	}
	data = bytes.TrimSpace(data)
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return nil, usageError{fmt.Errorf("--%s%s: not valid JSON at byte %d: %v (a JSON object such as '{\"n\":1}'; @FILE reads a file, - reads stdin)",
				flag, from, syntax.Offset, syntax)}
		}
		return nil, usageError{fmt.Errorf("--%s%s: not valid JSON: %v", flag, from, err)}
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, usageError{fmt.Errorf("--%s%s: a JSON object such as '{\"n\":1}', not %s", flag, from, jsonKind(v))}
	}
	return json.RawMessage(data), nil
}

// jsonKind names the kind of a decoded JSON value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	}
	return "another value"
}
