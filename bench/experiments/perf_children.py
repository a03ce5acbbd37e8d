#!/usr/bin/env python3
"""Where a function's samples go, by the function it called, in `perf script`
call-graph samples.

usage: perf_children.py FILE FUNCTION [FUNCTION...]

FILE is the text of `perf script -F ip,sym -i X.perf.data` of a recording
with call graphs (the clients bench's `--kernel-top N --perf-keep DIR`
keeps them; build with `RUSTFLAGS="-C force-frame-pointers=yes"` so the
stacks are whole). For each FUNCTION (a suffix of the symbol), every sample
whose stack holds it is counted under the frame just inside its outermost
occurrence ("(self)" when it is the innermost): its inclusive share of all
samples, split by child. The thirty-third round (bench/README.md) used it as
`perf_children.py tessera.txt 'ShardApp>::on_tick' 'Cell>::run_views'
'views::flush_counted'`.
"""

import collections
import re
import sys


def samples(path):
    """Each sample's symbols, innermost first."""
    cur = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            s = line.strip()
            if not s:
                if cur:
                    yield cur
                cur = []
                continue
            parts = s.split(None, 1)
            cur.append(parts[1] if len(parts) > 1 else parts[0])
    if cur:
        yield cur


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    stacks = list(samples(sys.argv[1]))
    total = len(stacks)
    if total == 0:
        sys.exit(f"perf_children.py: no samples in {sys.argv[1]}")
    print(f"{total} samples")
    for name in sys.argv[2:]:
        children, n = collections.Counter(), 0
        for st in stacks:
            at = [i for i, f in enumerate(st) if f.endswith(name)]
            if not at:
                continue
            n += 1
            i = at[-1]
            child = st[i - 1] if i > 0 and st[i - 1] != st[i] else "(self)"
            children[re.sub(r"<impl [^>]*>", "", child)[:100]] += 1
        print(f"== {name}: {100 * n / total:.2f} % of all samples")
        for child, c in children.most_common(20):
            print(f"  {100 * c / total:6.2f}  {child}")


if __name__ == "__main__":
    main()
