// Package partition maps a group to its partition (issue 34): the same
// hash NATS's subject mapping computes with partition(n, token) (FNV-1a of
// the group token, modulo the partitions), so that a subject mapped by the
// server and a group mapped here agree, and a group never changes
// partition while the count stays what the cluster was created with.
package partition

import (
	"fmt"
	"hash/fnv"
)

// Max is the most partitions a cluster may have.
const Max = 1024

// Check says whether n partitions may be: from 1 to Max.
func Check(n int) error {
	if n < 1 || n > Max {
		return fmt.Errorf("%d partitions: a cluster has from 1 to %d", n, Max)
	}
	return nil
}

// Of is group's partition of n. n must pass Check (Of panics otherwise:
// the count is checked where it is configured).
func Of(group string, n int) int {
	if err := Check(n); err != nil {
		panic(err)
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(group))
	return int(h.Sum32() % uint32(n)) //nolint:gosec // G115: n is at most Max (Check)
}

// Mapping is the NATS subject mapping that routes subjects
// prefix.kind.<group> followed by tokens more tokens to the group's
// partition of n, in a namespace of their own (so that a mapped subject
// never matches what the unmapped ones match, and no publisher picks a
// partition by naming it: only the mapping may publish there):
// "fairway.submit.*.*" → "fairway.part.{{partition(4,1)}}.submit.{{wildcard(1)}}.{{wildcard(2)}}".
func Mapping(prefix, kind string, n, tokens int) (from, to string, err error) {
	if err := Check(n); err != nil {
		return "", "", err
	}
	from = prefix + "." + kind + ".*"
	to = fmt.Sprintf("%s.part.{{partition(%d,1)}}.%s.{{wildcard(1)}}", prefix, n, kind)
	for i := 2; i <= tokens+1; i++ {
		from += ".*"
		to += fmt.Sprintf(".{{wildcard(%d)}}", i)
	}
	return from, to, nil
}
