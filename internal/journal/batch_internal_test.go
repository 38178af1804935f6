package journal

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAnExtensionsUnknownFieldsAreSkipped: an item's extension (fExt)
// carries the fields added once the mask was full, after a length: a
// reader that meets an extension field it does not know (written by a
// newer version, after the fields it knows) reads the ones it knows and
// the items after it as they were written.
func TestAnExtensionsUnknownFieldsAreSkipped(t *testing.T) {
	const unknown field = 1 << 9 // a field of a later version
	ext := binary.AppendUvarint(nil, uint64(eGiveBack|eEndedAt|unknown))
	ext = binary.AppendVarint(ext, 1_700_000_000_000_042)
	ext = append(ext, 0xde, 0xad, 0xbe, 0xef) // the unknown field's bytes
	body := []byte{binaryBatch}
	body = binary.AppendUvarint(body, 2)
	body = binary.AppendUvarint(body, uint64(fID|fExt))
	body = appendString(body, "acme")
	body = appendString(body, "j1")
	body = binary.AppendUvarint(body, uint64(len(ext)))
	body = append(body, ext...)
	body = binary.AppendUvarint(body, uint64(fID))
	body = appendString(body, "globex")
	body = appendString(body, "j2")

	items, err := Decode(body)
	require.NoError(t, err)
	require.Equal(t, []Item{{Group: "acme", ID: "j1", GiveBack: true, EndedAt: 1_700_000_000_000_042}, {Group: "globex", ID: "j2"}}, items)
	some, err := DecodeSome(body, []int32{1})
	require.NoError(t, err)
	require.Equal(t, Item{Group: "globex", ID: "j2"}, some[1], "stepped over the first item, its extension whole")
}
