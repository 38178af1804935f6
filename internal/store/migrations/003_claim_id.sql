-- The id of the dispatch request that claimed a job. An executor whose
-- request got no answer (the reply was lost, or the coordinator died after
-- the claim's commit) asks again under the same id and is handed the jobs
-- already claimed for it, instead of leaving them scheduled until their
-- lease runs out.
ALTER TABLE fairway_job ADD COLUMN claim_id text;
