package store

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/fairness"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/group_weight_set.sql
	groupWeightSetSQL string
	//go:embed sql/group_shares.sql
	groupSharesSQL string
)

// SetWeight sets a group's weight: its share of the executors against the
// other groups' (1 by default; 3 gets three times the share of a group of
// weight 1), by jobs or by time as scheduler.fairness says.
func (s *Store) SetWeight(ctx context.Context, group string, weight float64) error {
	if err := fairway.CheckName("group", group); err != nil {
		return err
	}
	if err := fairness.CheckWeight(weight); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, groupWeightSetSQL, group, weight); err != nil {
		return fmt.Errorf("setting the weight of group %s: %w", group, interpretError(err))
	}
	return nil
}

// GroupShares returns each group's share of the slot-time over the last
// window, and its weighted fair share; groups with a weight of their own
// are listed even if they ran nothing. running are the running jobs, from
// the partition's state (fairway_job has none of them).
func (s *Store) GroupShares(ctx context.Context, window time.Duration, running []journal.Running) ([]fairway.GroupShare, error) {
	groups, started := make([]string, len(running)), make([]time.Time, len(running))
	for i, r := range running {
		groups[i], started[i] = r.Group, time.UnixMicro(r.Started)
	}
	rows, err := s.pool.Query(ctx, groupSharesSQL, interval(window), groups, started)
	if err != nil {
		return nil, fmt.Errorf("reading the groups' shares: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (fairway.GroupShare, error) {
		var g fairway.GroupShare
		err := row.Scan(&g.Group, &g.Seconds, &g.Weight)
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the groups' shares: %w", interpretError(err))
	}
	return MergeShares(out), nil
}

// MergeShares makes one reading of the groups' shares of several
// databases' GroupShares (the partitions'): a group's seconds summed,
// its weight the first list's that names it (the home database's, which
// holds the weights set), and the shares worked out again over them all.
func MergeShares(lists ...[]fairway.GroupShare) []fairway.GroupShare {
	at := map[string]int{}
	var out []fairway.GroupShare
	for _, l := range lists {
		for _, g := range l {
			i, ok := at[g.Group]
			if !ok {
				at[g.Group] = len(out)
				out = append(out, fairway.GroupShare{Group: g.Group, Weight: g.Weight})
				i = len(out) - 1
			}
			out[i].Seconds += g.Seconds
		}
	}
	var seconds, weights float64
	for _, g := range out {
		seconds += g.Seconds
		if g.Seconds > 0 {
			weights += g.Weight
		}
	}
	for i, g := range out {
		if seconds > 0 {
			out[i].Share = g.Seconds / seconds
		}
		if g.Seconds > 0 && weights > 0 {
			out[i].FairShare = g.Weight / weights
		}
	}
	slices.SortFunc(out, func(a, b fairway.GroupShare) int { return strings.Compare(a.Group, b.Group) })
	return out
}
