#!/usr/bin/env bash
# The cost probe's steady-state instruction count: the host's instructions per
# client-second, with the warm-up and the logins taken out.
#
# callgrind counts everything inside the host's tick (`--toggle-collect`),
# the 5 s warm-up and the logins included. This runs the probe twice, with
# SHORT and LONG measured seconds, and subtracts: what is left is LONG - SHORT
# seconds of the steady walk, the same on every run of the same code (the walk
# is seeded). Prints the total and the functions that cost the most.
#
# usage: bash bench/cost_callgrind.sh [COST_BINARY] [CLIENTS] [SHORT] [LONG] [TOP]
#   COST_BINARY  the cost bench's executable (default: built now, from
#                `cargo bench -p tessera-bench --bench cost --no-run`)
#   CLIENTS 2000, SHORT 2, LONG 6, TOP 25 (functions listed, by inclusive count)
# About 3 minutes at 2,000 clients. Needs valgrind (callgrind_annotate).
#
# CACHE=1 also simulates this machine's first two data caches (48 KiB L1d,
# 12-way; 2 MiB L2 per core, 16-way, as callgrind's last level) and prints
# the misses per client-second: a figure that does not move with the
# machine's noise, for changes of memory layout the instruction count does
# not see; then the TOP functions by their (inclusive) L2 misses.
# (callgrind ignores prefetches: a prefetch's gain shows in time only.)
# About twice as slow.
#
# BRANCH=1 also simulates the branch predictor and prints the conditional
# branches and their mispredictions per client-second (callgrind's model is
# simpler than the hardware's, so read it as where mispredictions are, not
# how many), then the TOP source lines by mispredictions. About 1.5x slower.
#
# PROBE_ARGS: more of the probe's options, e.g. "--in-view 2" or
# "--set server.initial_cells=1" (the cost bench's doc lists them).
#
# The cell layout is pinned (`--set balance.enabled=false`, before
# PROBE_ARGS): the balancer measures the cells' CPU time, and under
# valgrind (about 50x slower) every cell looks overloaded, so it re-cut the
# world and the count was of a layout nobody configured (one initial cell
# and the default layout counted the same, 387,922 and 388,046 a
# client-second; with the layout pinned, 372,173 and 386,912).
set -euo pipefail

bin=${1:-}
clients=${2:-2000}
short=${3:-2}
long=${4:-6}
top=${5:-25}

if ! command -v valgrind >/dev/null; then
    echo "cost_callgrind.sh: valgrind is not installed" >&2
    exit 2
fi
if (( long <= short )); then
    echo "cost_callgrind.sh: LONG ($long) must exceed SHORT ($short)" >&2
    exit 2
fi
if [[ -z $bin ]]; then
    bin=$(cargo bench -p tessera-bench --bench cost --no-run --message-format=json 2>/dev/null |
        sed -n 's/.*"executable":"\([^"]*cost-[^"]*\)".*/\1/p' | tail -1)
fi
if [[ ! -x $bin ]]; then
    echo "cost_callgrind.sh: no cost bench executable ('$bin')" >&2
    exit 2
fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
read -r -a probe_args <<<"${PROBE_ARGS:-}"
cache_args=()
if [[ ${CACHE:-0} == 1 ]]; then
    cache_args=(--cache-sim=yes --D1=49152,12,64 --LL=2097152,16,64)
fi
if [[ ${BRANCH:-0} == 1 ]]; then
    cache_args+=(--branch-sim=yes --dump-instr=yes)
fi
for s in "$short" "$long"; do
    valgrind --tool=callgrind "${cache_args[@]}" --toggle-collect='*CellHost*as*ShardApp*on_tick*' \
        --callgrind-out-file="$dir/cg.$s" "$bin" "$clients" "$s" 1 \
        --set balance.enabled=false "${probe_args[@]}" >"$dir/log.$s" 2>&1 || {
        echo "cost_callgrind.sh: the probe failed ($s s):" >&2
        tail -5 "$dir/log.$s" >&2
        exit 1
    }
    # Inclusive instructions per function, "count<TAB>name".
    if [[ ${CACHE:-0} == 1 ]]; then
        # The whole run's misses: "D1mr D1mw LLmr LLmw".
        callgrind_annotate --auto=no --show=D1mr,D1mw,DLmr,DLmw "$dir/cg.$s" 2>/dev/null |
            awk '/PROGRAM TOTALS/ && !done { gsub(/\([^)]*\)/, ""); gsub(",", "");
                                             print $1, $2, $3, $4; done = 1 }' >"$dir/miss.$s"
        # Inclusive L2 (last level) misses per function, "reads<TAB>writes<TAB>name".
        callgrind_annotate --inclusive=yes --auto=no --show=DLmr,DLmw "$dir/cg.$s" 2>/dev/null |
            awk '/^ *[0-9,]+ \([^)]*\) +[0-9,]+ \(/ {
                r = $1; gsub(",", "", r); w = $3; gsub(",", "", w)
                name = $0; sub(/^ *[0-9,]+ \([^)]*\) +[0-9,]+ \([^)]*\) +/, "", name)
                sub(/ \[.*/, "", name); sub(/^[^:]*:/, "", name)
                if (!(name in best) || r + 0 > best[name] + 0) { best[name] = r; wr[name] = w }
            } END { for (k in best) printf "%s\t%s\t%s\n", best[k], wr[k], k }' >"$dir/lmiss.$s"
    fi
    if [[ ${BRANCH:-0} == 1 ]]; then
        # The whole run's conditional branches and their mispredictions.
        callgrind_annotate --auto=no --show=Bc,Bcm "$dir/cg.$s" 2>/dev/null |
            awk '/PROGRAM TOTALS/ && !done { gsub(/\([^)]*\)/, ""); gsub(",", "");
                                             print $1, $2; done = 1 }' >"$dir/branch.$s"
    fi
    callgrind_annotate --inclusive=yes --auto=no --show=Ir "$dir/cg.$s" 2>/dev/null |
        awk '/^ *[0-9,]+ \(/ {
            n = $1; gsub(",", "", n)
            name = $0; sub(/^ *[0-9,]+ \([^)]*\) +/, "", name); sub(/ \[.*/, "", name)
            sub(/^[^:]*:/, "", name)
            if (!(name in best) || n + 0 > best[name] + 0) best[name] = n
        } END { for (k in best) printf "%s\t%s\n", best[k], k }' >"$dir/incl.$s"
done

awk -F'\t' -v cs="$(( clients * (long - short) ))" -v top="$top" -v bin="$bin" '
    FNR == NR { a[$2] = $1; next }
    { d = $1 - a[$2]; if ($2 == "PROGRAM TOTALS") total = d; diff[$2] = d }
    END {
        printf "cost probe, steady state: %s\n", bin
        printf "host instructions: %.0f in %d client-seconds = %.0f per client-second\n", total, cs, total / cs
        n = 0
        for (k in diff) if (diff[k] > 0 && diff[k] < total) { keys[n++] = k }
        # insertion sort by instructions, descending (a few hundred names)
        for (i = 1; i < n; i++) { k = keys[i]; j = i - 1
            while (j >= 0 && diff[keys[j]] < diff[k]) { keys[j + 1] = keys[j]; j-- }
            keys[j + 1] = k }
        for (i = 0; i < n && i < top; i++)
            printf "%6.2f%% %9.0f  %s\n", 100 * diff[keys[i]] / total, diff[keys[i]] / cs, substr(keys[i], 1, 110)
    }' "$dir/incl.$short" "$dir/incl.$long"

if [[ ${CACHE:-0} == 1 ]]; then
    paste -d' ' "$dir/miss.$short" "$dir/miss.$long" |
        awk -v cs="$(( clients * (long - short) ))" '{
            printf "L1d misses per client-second: %.0f (reads %.0f, writes %.0f)\n", ($5 + $6 - $1 - $2) / cs, ($5 - $1) / cs, ($6 - $2) / cs
            printf "L2 (2 MiB) misses per client-second: %.0f (reads %.0f, writes %.0f)\n", ($7 + $8 - $3 - $4) / cs, ($7 - $3) / cs, ($8 - $4) / cs
        }'
    # The functions whose work misses L2 the most (inclusive, per client-second).
    awk -F'\t' -v cs="$(( clients * (long - short) ))" -v top="$top" '
        FNR == NR { r[$3] = $1; w[$3] = $2; next }
        { dr[$3] = ($1 - r[$3]) / cs; dw[$3] = ($2 - w[$3]) / cs }
        END {
            # Not the callers every miss is under (main, the tick itself).
            t = dr["PROGRAM TOTALS"] + dw["PROGRAM TOTALS"]
            for (k in dr) if (dr[k] + dw[k] > 0.5 && dr[k] + dw[k] < 0.99 * t)
                printf "%.1f\t%.1f\t%s\n", dr[k], dw[k], k
        }' \
        "$dir/lmiss.$short" "$dir/lmiss.$long" | sort -t$'\t' -k1,1 -rn | head -n "$top" |
        awk -F'\t' 'BEGIN { print "L2 misses per client-second by function (inclusive): reads, writes" }
                     { printf "%9s %8s  %s\n", $1, $2, substr($3, 1, 110) }'
fi

if [[ ${BRANCH:-0} == 1 ]]; then
    paste -d' ' "$dir/branch.$short" "$dir/branch.$long" |
        awk -v cs="$(( clients * (long - short) ))" '{
            printf "conditional branches per client-second: %.0f, mispredicted %.0f\n", ($3 - $1) / cs, ($4 - $2) / cs
        }'
    # Where they are: the longer run's source lines (warm-up included).
    echo "source lines by mispredictions (the $long s run, warm-up included):"
    callgrind_annotate --show=Bcm --sort=Bcm --auto=yes "$dir/cg.$long" 2>/dev/null |
        awk -v top="$top" '
            /Auto-annotated source:/ { f = $NF; sub(/.*\//, "", f); next }
            f != "" && /^ *[0-9,]+ \(/ && !/=>/ && !/events annotated/ {
                n = $1; gsub(",", "", n); line = $0
                sub(/^ *[0-9,]+ \([^)]*\) +/, "", line); gsub(/^ +/, "", line)
                printf "%s\t%s\t%s\n", n, f, substr(line, 1, 90)
            }' | sort -t$'\t' -k1,1 -rn | head -n "$top" |
        awk -F'\t' '{ printf "%10s  %-16s %s\n", $1, $2, $3 }'
fi
