package config

// ParseStreamSize parses a stream's size as the nats.*-max-bytes keys read
// it: a positive number of bytes, at most 1024 GiB, plain ("1073741824")
// or with a unit ("512MiB", "4GiB", "2MB").
func ParseStreamSize(s string) (int64, error) { return parseStreamSize(s) }

// FormatByteSize writes n as the configuration prints sizes: with the
// largest 1024-based unit that divides it (64MiB), else in bytes.
func FormatByteSize(n int64) string { return formatByteSize(n) }
