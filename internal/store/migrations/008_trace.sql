-- Tracing: a job's trace context, the W3C traceparent of the span that
-- stored it (docs/tracing.md). NULL when tracing is off, so it costs
-- nothing then; adding a nullable column without a default rewrites no
-- rows.
ALTER TABLE fairway_job ADD COLUMN traceparent text;
