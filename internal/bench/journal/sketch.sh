#!/usr/bin/env bash
# sketch.sh: what PostgreSQL would pay per job with a batch journal (the
# engine issue's next step, docs/performance.md "The batch journal,
# measured before it is built"). Each batch of N jobs is three appended
# journal rows (submitted, scheduled, ended: one transaction each, as the
# three would be) and, at the end, one row per job written once with the
# listing and retention indexes of today's job table. pgbench drives it on
# 4 connections; the PostgreSQL server's CPU (postmaster, reaped and live
# children, from /proc: run it on the server's machine) and WAL are taken
# around the run.
#
#   internal/bench/journal/sketch.sh --database-url postgres://fairway@127.0.0.1:5499/postgres --pgdata /tmp/pgb/data
#
# The URL's user needs CREATEDB: the sketch uses a database of its own,
# fairway_journal_sketch, dropped at the end. pgbench comes from
# PostgreSQL's binaries (on PATH, or /usr/lib/postgresql/*/bin).
set -euo pipefail
db="" pgdata="" jobs=200000
while [ $# -gt 0 ]; do
	case "$1" in
	--database-url) db=$2; shift 2 ;;
	--pgdata) pgdata=$2; shift 2 ;;
	--jobs) jobs=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "sketch.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
if [ -z "$db" ] || [ -z "$pgdata" ]; then
	echo "sketch.sh: --database-url and --pgdata (the server's data directory, for its postmaster's pid) are required" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
pgbench=$(command -v pgbench || ls /usr/lib/postgresql/*/bin/pgbench | tail -1)
sketch=$(echo "$db" | sed -E 's#/[^/?]*(\?|$)#/fairway_journal_sketch\1#')

pgcpu() { # CPU seconds of the server: postmaster with reaped children, and live children
	local pm t c
	pm=$(head -1 "$pgdata/postmaster.pid")
	t=$(awk '{print $14+$15+$16+$17}' "/proc/$pm/stat")
	for c in $(pgrep -P "$pm"); do t=$((t + $(awk '{print $14+$15}' "/proc/$c/stat" 2>/dev/null || echo 0))); done
	echo "$t $(getconf CLK_TCK)" | awk '{printf "%.3f", $1 / $2}'
}

psql "$db" -qc "DROP DATABASE IF EXISTS fairway_journal_sketch" -c "CREATE DATABASE fairway_journal_sketch"
trap 'psql "$db" -qc "DROP DATABASE IF EXISTS fairway_journal_sketch WITH (FORCE)"' EXIT
for n in 100 1000; do
	psql "$sketch" -q -f "$here/schema.sql" 2>/dev/null
	per=$((jobs / n / 4))
	w0=$(psql "$sketch" -Atc "SELECT pg_current_wal_lsn()")
	c0=$(pgcpu)
	"$pgbench" "$sketch" -n -M prepared -f "$here/batch.sql" -D n="$n" -c 4 -j 2 -t "$per" >/dev/null
	c1=$(pgcpu)
	w1=$(psql "$sketch" -Atc "SELECT pg_current_wal_lsn()")
	done=$((per * 4 * n))
	wal=$(psql "$sketch" -Atc "SELECT pg_wal_lsn_diff('$w1', '$w0')")
	echo "batch=$n jobs=$done" "$(echo "$c0 $c1 $done $wal" | awk '{printf "pg_us_per_job=%.1f wal_bytes_per_job=%.0f", ($2-$1)*1e6/$3, $4/$3}')"
done
