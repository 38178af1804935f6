-- Learns how long attempts ran, when fairness counts time (see
-- shares.go): $1 groups, $2 job ids, $3 run times in milliseconds, $4 the
-- weight of a run in the averages. Each group's virtual time is corrected
-- by the difference between what its jobs ran and what they were charged
-- (the average before), over its weight; then the averages of each group
-- and task, and of each task over every group (group_name ''), move
-- towards the runs. Under the fairness lock, as claims read and write
-- them.
WITH lock AS MATERIALIZED (
    SELECT 1 FROM fairway_fairness WHERE id = 1 FOR UPDATE
), ran AS (
    SELECT r.group_name, j.task, count(*) AS n, avg(r.ms) AS ms
      FROM unnest($1::text[], $2::text[], $3::float8[]) AS r (group_name, id, ms)
      JOIN fairway_job j ON j.group_name = r.group_name AND j.id = r.id
     WHERE EXISTS (SELECT 1 FROM lock)
     GROUP BY r.group_name, j.task
), charged AS (
    SELECT ran.*, coalesce(own.avg_ms, overall.avg_ms, 1000) AS charged_ms
      FROM ran
      LEFT JOIN fairway_run_time own ON own.group_name = ran.group_name AND own.task = ran.task
      LEFT JOIN fairway_run_time overall ON overall.group_name = '' AND overall.task = ran.task
), corrected AS (
    UPDATE fairway_group_share s
       SET vtime = s.vtime + c.diff / 1000 / s.weight, updated = now()
      FROM (SELECT group_name, sum(n * (ms - charged_ms)) AS diff FROM charged GROUP BY group_name) c
     WHERE s.group_name = c.group_name
), learned AS (
    SELECT group_name, task, n, ms FROM ran
    UNION ALL
    SELECT '', task, sum(n), sum(n * ms) / sum(n) FROM ran GROUP BY task
)
INSERT INTO fairway_run_time AS t (group_name, task, avg_ms, runs)
SELECT group_name, task, ms, n FROM learned
    ON CONFLICT (group_name, task) DO UPDATE
   SET avg_ms = t.avg_ms + (1 - power(1 - $4::float8, excluded.runs)) * (excluded.avg_ms - t.avg_ms),
       runs = t.runs + excluded.runs, updated = now()
