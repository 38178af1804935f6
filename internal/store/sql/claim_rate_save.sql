-- Writes back the token buckets a claim took from: $1 keys, $2 tokens as
-- of $3, the time each was read (claim_rate_buckets.sql).
INSERT INTO fairway_rate_bucket AS b (key, tokens, at)
SELECT k, t, a FROM unnest($1::text[], $2::float8[], $3::timestamptz[]) AS u (k, t, a)
    ON CONFLICT (key) DO UPDATE SET tokens = excluded.tokens, at = excluded.at
