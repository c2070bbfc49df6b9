"""The bench report as a PNG (needs matplotlib): one labelled bar per row, its %
of the copy ceiling measured beside it. The ops braze ships are memory-bound, so
the share of the copy ceiling is the figure to read; a roofline would put every
point at an arithmetic intensity below 1 and label none of them."""
from __future__ import annotations

COLORS = {"braze": "#d95f02", "numpy": "#7570b3", "torch": "#1b9e77", "torch.compile": "#66a61e", "liger": "#e7298a"}


def ceiling_bars(report, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise RuntimeError("--plot needs matplotlib (pip install 'braze[bench]')") from e
    rows = report["rows"]
    groups = []  # (op, shape, dtype) in report order, each with its impls
    for r in rows:
        key = (r["op"], "x".join(map(str, r["shape"])), r["dtype"])
        if not groups or groups[-1][0] != key:
            groups.append((key, []))
        groups[-1][1].append(r)
    n = sum(len(g) for _, g in groups)
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.28 * n + 0.15 * len(groups)))
    y, ticks, labels, top = 0.0, [], [], 100.0
    for (op, shape, dtype), impls in groups:
        for r in impls:
            pct = r["pct_ceiling"]
            top = max(top, pct)
            ax.barh(y, pct, height=0.8, color=COLORS.get(r["impl"], "#999999"))
            t = r["ms"]
            when = f"{t * 1e3:.1f} us" if t < 1 else f"{t:.2f} ms"
            ax.text(pct, y, f" {pct:.0f}%  {when}", va="center", fontsize=7)
            ticks.append(y)
            labels.append(f"{op} {shape} {dtype}  {r['impl']}")
            y += 1
        y += 0.6  # a gap between (op, shape) groups
    ax.axvline(100, color="k", linestyle="--", linewidth=1)
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_ylim(y - 0.6, -0.8)  # first row on top, no empty band
    ax.set_xlim(0, top * 1.25)
    ax.set_xlabel(f"% of the copy ceiling measured beside each row (median {report['ceiling_gbs']:.1f} GB/s, "
                  "bytes read + written)")
    ax.set_title(f"braze bench: {report['device']} ({report['backend']}, {report['commit']})", fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS.get(i, "#999999")) for i in dict.fromkeys(r["impl"] for r in rows)]
    ax.legend(handles, list(dict.fromkeys(r["impl"] for r in rows)), fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
