-- Of the submitted trackers ($1 groups, $2 trackers), those held by a
-- job not yet final.
SELECT j.group_name, j.tracker, j.id FROM unnest($1::text[], $2::text[]) AS t (group_name, tracker)
JOIN fairway_job j ON j.group_name = t.group_name AND j.tracker = t.tracker
WHERE j.state NOT IN ('success', 'failed', 'cancelled')
