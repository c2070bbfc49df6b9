"""Roofline PNG of a bench report (needs matplotlib)."""
from __future__ import annotations


def roofline(report, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise RuntimeError("--plot needs matplotlib (pip install 'braze[bench]')") from e
    ceil = report["ceiling_gbs"]
    fig, ax = plt.subplots(figsize=(7, 5))
    xs = [r["flops"] / r["bytes"] for r in report["rows"] if r["bytes"]]
    lo, hi = min(xs + [0.05]) / 2, max(xs + [10]) * 2
    ax.plot([lo, hi], [ceil * lo, ceil * hi], "k--", label=f"copy ceiling {ceil:.0f} GB/s")
    for impl in sorted({r["impl"] for r in report["rows"]}):
        pts = [(r["flops"] / r["bytes"], r["flops"] / (r["ms"] / 1e3) / 1e9) for r in report["rows"]
               if r["impl"] == impl and r["bytes"]]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], label=impl, s=18)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (flop / byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"braze bench: {report['device']} ({report['backend']})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
