-- Writes back the token buckets a claim took from: $1 keys, $2 tokens now.
INSERT INTO fairway_rate_bucket AS b (key, tokens, at)
SELECT k, t, now() FROM unnest($1::text[], $2::float8[]) AS u (k, t)
    ON CONFLICT (key) DO UPDATE SET tokens = excluded.tokens, at = excluded.at
