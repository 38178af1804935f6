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

// Of is group's partition of n (0 for n ≤ 1).
func Of(group string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(group))
	return int(h.Sum32() % uint32(n)) //nolint:gosec // G115: n is at most Max
}

// Mapping is the NATS subject mapping that adds the partition of n after
// prefix.kind to subjects prefix.kind.<group>.…(tokens more after the
// group): "fairway.submit.*.*" → "fairway.submit.{{partition(4,1)}}.{{wildcard(1)}}.{{wildcard(2)}}".
func Mapping(prefix, kind string, n, tokens int) (from, to string) {
	from = prefix + "." + kind + ".*"
	to = fmt.Sprintf("%s.%s.{{partition(%d,1)}}.{{wildcard(1)}}", prefix, kind, n)
	for i := 2; i <= tokens+1; i++ {
		from += ".*"
		to += fmt.Sprintf(".{{wildcard(%d)}}", i)
	}
	return from, to
}
