-- The move onto the journal (store.ConvertToJournal): a job whose cancel
-- was requested while it ran ends cancelled here, with its record, rather
-- than run again on the journal.
UPDATE fairway_job_row
   SET state = 'cancelled', finished = now(), worker = NULL, worker_instance = '', lease_until = NULL,
       error = coalesce(error, 'cancelled: its cancel was requested while it ran, before the database moved onto the journal engine')
 WHERE state NOT IN ('success', 'failed', 'cancelled') AND cancel_requested
