-- Takes or renews the maintenance lead for $1 until now() + $2: renewed
-- while $1 holds it, taken when its lease ran out (the term then counts
-- one more holder). No row: another coordinator leads.
UPDATE fairway_leader
   SET holder = $1,
       term = CASE WHEN holder = $1 AND until >= now() THEN term ELSE term + 1 END,
       until = now() + $2::interval
 WHERE id = 1 AND (holder = $1 OR until < now())
RETURNING term
