package partition

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/fairwayhq/fairway/internal/secret"
)

// Layout is where a cluster's partitions live: how many there are, and
// each one's database (configuration: database.partitions and
// database.partition-urls). A partition the map does not name lives in
// the home database (database.url), which also holds what belongs to the
// whole cluster.
type Layout struct {
	// Count is the number of partitions (Check).
	Count int
	// Home is the home database's URL.
	Home string
	// URLs are the databases of the partitions that do not live in Home.
	URLs map[int]string
}

// Check says whether the layout may be: its count passes Check, and each
// partition the map names is one of them.
func (l Layout) Check() error {
	if err := Check(l.Count); err != nil {
		return err
	}
	for _, p := range slices.Sorted(maps.Keys(l.URLs)) {
		if p < 0 || p >= l.Count {
			return fmt.Errorf("partition %d has a database, but the cluster's %d partitions are numbered 0 to %d", p, l.Count, l.Count-1)
		}
	}
	return nil
}

// URL is partition p's database.
func (l Layout) URL(p int) string {
	if u, ok := l.URLs[p]; ok {
		return u
	}
	return l.Home
}

// Database is one database of a layout and the partitions it holds.
type Database struct {
	URL        string
	Home       bool
	Partitions []int
}

// Databases are the layout's databases, the home one first (whether or
// not it holds a partition), the others in the order of their first
// partition; a database named twice is one.
func (l Layout) Databases() []Database {
	out := []Database{{URL: l.Home, Home: true}}
	at := map[string]int{l.Home: 0}
	for p := range l.Count {
		u := l.URL(p)
		i, ok := at[u]
		if !ok {
			i = len(out)
			at[u] = i
			out = append(out, Database{URL: u})
		}
		out[i].Partitions = append(out[i].Partitions, p)
	}
	return out
}

// ParseURLs reads the partitions' databases as configured: P=URL pairs
// separated by spaces or new lines, e.g. "1=postgres://b/fairway
// 3=postgres://c/fairway". URLs only (a keyword/value connection string
// has spaces of its own), each partition named once.
func ParseURLs(s string) (map[int]string, error) {
	out := map[int]string{}
	for _, pair := range strings.Fields(s) {
		ps, u, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not P=URL (e.g. 1=postgres://user@host/db)", secret.Mask(pair))
		}
		p, err := strconv.Atoi(ps)
		if err != nil || p < 0 || p >= Max {
			return nil, fmt.Errorf("%q: the partition %q is not a number from 0 to %d", secret.Mask(pair), ps, Max-1)
		}
		if _, dup := out[p]; dup {
			return nil, fmt.Errorf("partition %d is named twice", p)
		}
		parsed, err := url.Parse(u)
		if err != nil || parsed.Host == "" || (parsed.Scheme != "postgres" && parsed.Scheme != "postgresql") {
			return nil, fmt.Errorf("partition %d: %q is not a postgres:// URL (e.g. postgres://user@host/db)", p, secret.Mask(u))
		}
		out[p] = u
	}
	return out, nil
}

// FormatURLs writes urls as ParseURLs reads them, in partition order.
func FormatURLs(urls map[int]string) string {
	parts := make([]string, 0, len(urls))
	for _, p := range slices.Sorted(maps.Keys(urls)) {
		parts = append(parts, strconv.Itoa(p)+"="+urls[p])
	}
	return strings.Join(parts, " ")
}
