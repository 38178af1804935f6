-- Writes back a claim's virtual times: $1 groups, $2 their virtual times,
-- $3 the clock.
WITH clock AS (
    UPDATE fairway_fairness SET vclock = $3 WHERE id = 1
)
INSERT INTO fairway_group_share AS s (group_name, vtime)
SELECT g, v FROM unnest($1::text[], $2::float8[]) AS u (g, v)
    ON CONFLICT (group_name) DO UPDATE SET vtime = excluded.vtime, updated = now()
