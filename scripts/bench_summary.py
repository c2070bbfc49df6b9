"""One line per (op, shape) of a `braze bench --json` report: braze's time and
% of the copy ceiling beside every peer's, e.g.
    python scripts/bench_summary.py bench_cuda.json
"""
import json
import sys


def main(path):
    rep = json.load(open(path))
    seen = {}
    for r in rep["rows"]:
        seen.setdefault((r["op"], "x".join(map(str, r["shape"]))), []).append(r)
    print(f"commit {rep['commit']}  device {rep['device']}")
    for (op, shape), rows in seen.items():
        cells = []
        for r in rows:
            t = r["ms"] * 1e3
            cells.append(f"{r['impl']} {t:.1f}us {r['pct_ceiling']:.0f}%")
        print(f"{op:<15} {shape:<16} " + " | ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1])
