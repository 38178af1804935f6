-- Sets group $1's weight to $2 (1 is the default). A new group's row
-- starts at the clock, as a group that has nothing waiting would.
INSERT INTO fairway_group_share AS s (group_name, weight, vtime)
VALUES ($1, $2, (SELECT vclock FROM fairway_fairness WHERE id = 1))
    ON CONFLICT (group_name) DO UPDATE SET weight = excluded.weight, updated = now()
