#!/usr/bin/env python3
"""Who calls a function, in `perf script` call-graph samples, side by side.

usage: perf_callers.py FUNCTION DEPTH FILE [FILE...]

Each FILE is the text of `perf script -i X.perf.data` of a recording with
call graphs (the clients bench's `--kernel-top N --perf-keep DIR` keeps
them). For every sample whose stack holds FUNCTION, the DEPTH frames above
its first occurrence (its caller, the caller's caller, ...) name a row; a
column per file counts the samples. The first line gives each file's
total samples: with the same sampling rate and window (as the bench's
runs have) the counts compare directly.

The twenty-fifth round (bench/README.md) used it as
`perf_callers.py __tcp_transmit_skb 3 floor.txt tessera.txt` to split the
segments sent into data (`tcp_write_xmit ...`) and bare ACKs sent at a
read (`tcp_recvmsg_locked ...`) or by the delayed-ACK timer.
"""

import collections
import re
import sys


def frames(sample):
    """The function names of one sample's stack, innermost first."""
    names = []
    for line in sample.strip().split("\n")[1:]:
        parts = line.strip().split(" ", 1)
        if len(parts) == 2:
            names.append(re.sub(r"\+0x[0-9a-f]+.*$", "", parts[1]).strip()[:60])
    return names


def callers(path, function, depth):
    """(total samples, Counter of caller chains) of one file."""
    total, rows = 0, collections.Counter()
    with open(path, encoding="utf-8", errors="replace") as f:
        for sample in f.read().split("\n\n"):
            names = frames(sample)
            if not names:
                continue
            total += 1
            if function in names:
                i = names.index(function)
                rows[" > ".join(names[i + 1 : i + 1 + depth]) or "(none)"] += 1
    return total, rows


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    function, depth, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    results = [callers(p, function, depth) for p in paths]
    print("samples " + " ".join(f"{t:>8}" for t, _ in results) + "  " + " | ".join(paths))
    keys = set().union(*(r.keys() for _, r in results))
    for k in sorted(keys, key=lambda k: -sum(r[k] for _, r in results)):
        print("        " + " ".join(f"{r[k]:>8}" for _, r in results) + "  " + k)


if __name__ == "__main__":
    main()
