-- The token buckets $1 of the rate limits, as of now by the clock (not
-- the transaction's start: claims wait for the fairness lock after it, and
-- this read comes after the lock, so the times of successive claims'
-- reads only go forward): each key, its tokens and the seconds since they
-- were counted (NULL for a bucket never taken from), and the time of the
-- read, which the claim stamps the bucket with when it writes it back
-- (refilled in Go).
SELECT k.key, b.tokens, extract(epoch FROM c.t - b.at)::float8, c.t
  FROM unnest($1::text[]) AS k (key)
 CROSS JOIN (SELECT clock_timestamp() AS t) c
  LEFT JOIN fairway_rate_bucket b ON b.key = k.key
