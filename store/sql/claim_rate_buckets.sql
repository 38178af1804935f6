-- The token buckets $1 of the rate limits, with the seconds since their
-- tokens were counted (refilled in Go). Read under the fairness lock.
SELECT key, tokens, extract(epoch FROM now() - at)::float8 FROM fairway_rate_bucket WHERE key = ANY ($1::text[])
