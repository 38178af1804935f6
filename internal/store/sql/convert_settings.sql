-- The move onto the journal (store.ConvertToJournal): the groups' weights
-- other than 1 and the rate limits, which the journal keeps in its rows
-- (weight and rate), as kind, group, task, weight or starts, period.
SELECT 'weight', group_name, '', weight, 0::bigint FROM fairway_group_share WHERE weight <> 1
UNION ALL
SELECT 'rate', group_name, task, starts::double precision, period_ms FROM fairway_rate_limit
