"""Condenses `ncu --metrics ...` text output (scripts/ncu_norm.sh) to two lines per kernel."""
import re
import sys

KEYS = {"gpu__time_duration.sum": "t", "dram__bytes_read.sum": "rd", "dram__bytes_write.sum": "wr",
        "launch__registers_per_thread": "regs", "launch__block_size": "block", "launch__grid_size": "grid",
        "sm__warps_active.avg.pct_of_peak_sustained_active": "occ%",
        "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active": "lsu%",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm%",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum": "smem_wf", "smsp__inst_executed.sum": "inst"}


def main(path):
    for blk in re.split(r"\n  (?=\S)", open(path).read()):
        head = blk.split("\n")[0]
        if "(" not in head or "Profiling" in head:
            continue
        vals, stalls = {}, {}
        for line in blk.split("\n")[1:]:
            f = line.split()
            if len(f) < 2:
                continue
            name, val = f[0], " ".join(f[1:])
            if name in KEYS:
                vals[KEYS[name]] = val
            m = re.match(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active.ratio", name)
            if m:
                stalls[m.group(1)] = f[-1]
        print(head.strip()[:140])
        print("   ", "  ".join(f"{k} {v}" for k, v in vals.items()))
        print("    stalls/issue:", " ".join(f"{k} {v}" for k, v in stalls.items()))


if __name__ == "__main__":
    main(sys.argv[1])
