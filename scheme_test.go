package fairway_test

import (
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/stretchr/testify/require"
)

func TestCountingScheme(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want fairway.CountingScheme
		err  string
	}{
		{in: "4,1", want: fairway.CountingScheme{High: 4, Low: 1}},
		{in: "0,1", want: fairway.CountingScheme{High: 0, Low: 1}},
		{in: "1,0", want: fairway.CountingScheme{High: 1, Low: 0}},
		{in: " 2 , 3 ", want: fairway.CountingScheme{High: 2, Low: 3}},
		{in: "4", err: "not a counting scheme"},
		{in: "a,b", err: "not a counting scheme"},
		{in: "1,2,3", err: "not a counting scheme"},
		{in: "-1,2", err: "must not be negative"},
		{in: "0,0", err: "must not both be 0"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := fairway.ParseCountingScheme(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			again, err := fairway.ParseCountingScheme(got.String())
			require.NoError(t, err)
			require.Equal(t, got, again)
		})
	}
	require.Equal(t, "4,1", fairway.CountingScheme{High: 4, Low: 1}.String())
	// 4,1: four high, one low, again; 0,1 always low.
	var seq []fairway.Priority
	for n := range int64(6) {
		seq = append(seq, fairway.CountingScheme{High: 4, Low: 1}.At(n))
	}
	require.Equal(t, []fairway.Priority{"high", "high", "high", "high", "low", "high"}, seq)
	require.Equal(t, fairway.PriorityLow, fairway.CountingScheme{High: 0, Low: 1}.At(0))
}
