package config

import (
	"errors"
	"strconv"
	"strings"

	"github.com/fairwayhq/fairway/internal/secret"
)

// maxByteSize is the upper bound of coordinator.max-args-size.
const maxByteSize = 64 << 20

var byteUnits = []struct {
	suffix string
	factor int64
}{ // longest suffixes first
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
	{"B", 1}, {"", 1},
}

// parseByteSize parses a positive size of at most 64 MiB: plain bytes
// ("1048576") or a number with a unit ("512KiB", "1MiB", "2MB").
func parseByteSize(s string) (int64, error) {
	return parseSize(s, maxByteSize, "64MiB", "1048576, 512KiB, 1MiB, 2MB")
}

// parseStreamSize parses a positive size of at most 1024 GiB, written as
// parseByteSize reads them.
func parseStreamSize(s string) (int64, error) {
	return parseSize(s, 1<<40, "1024GiB", "1073741824, 512MiB, 4GiB")
}

// parseSize parses a positive size of at most limit bytes; errors write
// the limit as limitText and give examples.
func parseSize(s string, limit int64, limitText, examples string) (int64, error) {
	s = strings.TrimSpace(s)
	for _, u := range byteUnits {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
		if err != nil {
			break
		}
		if n <= 0 {
			return 0, errors.New("must be positive")
		}
		if n > limit/u.factor {
			return 0, errors.New("must be at most " + limitText)
		}
		return n * u.factor, nil
	}
	return 0, errors.New("not a size (examples: " + examples + ")")
}

// formatByteSize formats n with the largest 1024-based unit that divides it.
func formatByteSize(n int64) string {
	for _, u := range []struct {
		suffix string
		factor int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.factor == 0 {
			return strconv.FormatInt(n/u.factor, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// mask replaces a secret in Print and in errors.
const mask = secret.Masked
