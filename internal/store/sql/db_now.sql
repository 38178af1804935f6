-- PostgreSQL's clock: periodic tasks follow it, not the host's.
SELECT clock_timestamp()
