-- The weights and virtual times of groups $1 (see shares.go); a group
-- without a row has weight 1 and competes from the clock.
SELECT group_name, weight, vtime FROM fairway_group_share WHERE group_name = ANY ($1::text[])
