-- Saves the fairness cursor after a claim: $1 the last group served, $2 its counter.
UPDATE fairway_fairness SET last_group = $1, counter = $2 WHERE id = 1
