package fairway_test

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/stretchr/testify/require"
)

func TestEstimateEnd(t *testing.T) {
	start := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	end := fairway.EstimateEnd(start, 25, start.Add(10*time.Minute))
	require.NotNil(t, end)
	require.Equal(t, start.Add(40*time.Minute), *end, "a quarter in 10 minutes: 40 in all")
	require.Nil(t, fairway.EstimateEnd(start, 0, start.Add(time.Minute)), "no pace yet")
	require.Nil(t, fairway.EstimateEnd(start, 100, start.Add(time.Minute)), "done")
	require.Nil(t, fairway.EstimateEnd(start, 50, start.Add(-time.Minute)), "clocks apart")
}
