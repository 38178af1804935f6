#!/usr/bin/env bash
# pairs.sh: Fairway against River (the harness in ../shared/bench/river, a
# Go module of its own that Fairway never depends on), in alternating pairs
# on one PostgreSQL: each pair runs one `fairway bench` scenario and the
# same workload on River, one after the other (never in parallel), the
# first of the two alternating from pair to pair. For the drain it prints
# each pair's work_jobs_per_s and their ratio (Fairway ÷ River, taken
# within the pair), then the medians; for latency and fairness, both lines
# of each pair.
#
#   internal/bench/pairs.sh --database-url postgres://fairway:…@127.0.0.1:5433/fairway
#   internal/bench/pairs.sh --database-url … --scenario latency --pairs 3
#   task bench-river -- --database-url … --jobs 20000
#
# The URL's user needs CREATEDB: each Fairway scenario runs in a fresh
# database, and River in the database riverbench (created with psql when
# missing; --river-url names another). Arguments after -- go to
# `fairway bench`. Run it from anywhere; it builds both programs first.
set -euo pipefail

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	echo
	cat <<'EOF'
Options:
  --database-url URL   the PostgreSQL server (required)
  --scenario S         drain (default), latency or fairness
  --pairs N            pairs to run (default 5)
  --jobs N             drain: jobs per run (default 100000)
  --slots N            drain: Fairway's slots and River's workers (default 1000)
  --river-url URL      River's database (default: riverbench on the same server)
  --river-dir DIR      the River harness (default: ../shared/bench/river from the repository)
EOF
}

root=$(cd "$(dirname "$0")/../.." && pwd)
db="" scenario=drain pairs=5 jobs=100000 slots=1000 river_url="" river_dir="$root/../shared/bench/river"
extra=()
while [ $# -gt 0 ]; do
	case "$1" in
	--database-url) db=$2; shift 2 ;;
	--scenario) scenario=$2; shift 2 ;;
	--pairs) pairs=$2; shift 2 ;;
	--jobs) jobs=$2; shift 2 ;;
	--slots) slots=$2; shift 2 ;;
	--river-url) river_url=$2; shift 2 ;;
	--river-dir) river_dir=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	--) shift; extra=("$@"); break ;;
	*) echo "pairs.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
if [ -z "$db" ]; then
	echo "pairs.sh: --database-url is required (see --help)" >&2
	exit 2
fi

river_flags=(-cooldown 2ms -poll 20ms) # River's throughput settings (its README)
case "$scenario" in
drain)
	fairway_args=(--scenario drain --jobs "$jobs" --slots "$slots")
	river_args=(-mode drain -jobs "$jobs" -workers "$slots")
	;;
latency)
	fairway_args=(--scenario latency)
	river_args=(-mode latency -jobs 300)
	;;
fairness)
	# River has no noisy-tenants case: Fairway's is skipped.
	fairway_args=(--scenario fairness --noisy-tenants=-1)
	river_args=(-mode fairness -jobs 2000 -sleep 5 -small 20 -workers 10)
	;;
*) echo "pairs.sh: --scenario is drain, latency or fairness" >&2; exit 2 ;;
esac

if [ -z "$river_url" ]; then
	case "$db" in
	postgres://* | postgresql://*)
		# Swap the database of the URL (its path) for riverbench.
		river_url=$(printf '%s' "$db" | sed -E 's#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\1/riverbench#')
		;;
	*) echo "pairs.sh: give --river-url with a key=value --database-url" >&2; exit 2 ;;
	esac
fi
if [ ! -f "$river_dir/go.mod" ]; then
	echo "pairs.sh: no River harness in $river_dir (--river-dir)" >&2
	exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# building fairway and the River harness" >&2
(cd "$root" && go build -o "$tmp/fairway" ./cmd/fairway)
(cd "$river_dir" && go build -o "$tmp/riverbench" .)

if command -v psql >/dev/null; then
	if [ -z "$(psql "$river_url" -tAc 'SELECT 1' 2>/dev/null)" ]; then
		echo "# creating River's database: $(printf '%s' "$river_url" | sed -E 's#//[^@/]*@#//…@#')" >&2
		psql "$db" -qc 'CREATE DATABASE riverbench' >&2
	fi
fi

# figure LINE KEY prints the value of KEY=value in LINE.
figure() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }
# median prints the median of its arguments.
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

run_fairway() {
	"$tmp/fairway" bench --database-url "$db" "${fairway_args[@]}" "${extra[@]}" | grep -v '^#'
}
run_river() {
	"$tmp/riverbench" -db "$river_url" "${river_args[@]}" "${river_flags[@]}" | grep '^river '
}

echo "# PostgreSQL: $(printf '%s' "$db" | sed -E 's#//[^@/]*@#//…@#'); $pairs pairs of $scenario; fairway bench ${fairway_args[*]} ${extra[*]}; riverbench ${river_args[*]} ${river_flags[*]}"
fw=() rv=() ratios=()
for i in $(seq 1 "$pairs"); do
	if [ $((i % 2)) -eq 1 ]; then
		f=$(run_fairway)
		r=$(run_river)
	else
		r=$(run_river)
		f=$(run_fairway)
	fi
	echo "pair $i fairway: $f"
	echo "pair $i river:   $r"
	if [ "$scenario" = drain ]; then
		fw+=("$(figure "$f" work_jobs_per_s)")
		rv+=("$(figure "$r" work_jobs_per_s)")
		ratios+=("$(awk -v f="${fw[-1]}" -v r="${rv[-1]}" 'BEGIN {printf "%.3f", f/r}')")
		echo "pair $i work_jobs_per_s fairway=${fw[-1]} river=${rv[-1]} ratio=${ratios[-1]}"
	fi
done
if [ "$scenario" = drain ]; then
	echo "median work_jobs_per_s fairway=$(median "${fw[@]}") river=$(median "${rv[@]}") ratio=$(median "${ratios[@]}") (ratios: ${ratios[*]})"
fi
