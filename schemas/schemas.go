// Package schemas holds the JSON Schemas (draft 2020-12) of every body of
// Fairway's wire contract (see README.md and docs/nats-api.md); its test
// holds them to the Go types that encode and decode those bodies.
package schemas

import "embed"

// FS holds the schema files, named as in README.md.
//
//go:embed *.json
var FS embed.FS

// Base is the URI every schema's $id starts with.
const Base = "https://fairway.dev/schemas/"
