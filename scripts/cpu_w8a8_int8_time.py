"""int8 W8A8 on the CPU (default 64 x 4096 x 4096, 2 threads): braze on the AMX tile unit (where usable), braze's VNNI kernel (set_quant_amx(False)) and torch._int_mm, in alternating rounds (the box is shared and noisy).

Usage: python scripts/cpu_w8a8_int8_time.py [threads] [rounds] [MxNxK]
"""
import sys, time
import numpy as np, torch
import braze, braze.quant as bq

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
M, N, K = (int(v) for v in (sys.argv[3].split("x") if len(sys.argv) > 3 else (64, 4096, 4096)))
braze._cpu.set_num_threads(threads)
torch.set_num_threads(threads)
rng = np.random.default_rng(0)
x = rng.integers(-127, 128, (M, K), dtype=np.int8)
w = rng.integers(-127, 128, (N, K), dtype=np.int8)
sx = np.ones(M, np.float32)
qw = bq.QuantizedTensor("int8", (N, K), w, np.ones(N, np.float32))
out = np.empty((M, N), np.float32)
tx, tw = torch.from_numpy(x), torch.from_numpy(w).t()
amx0 = braze._cpu.quant_amx()

def t_braze(amx):
    braze._cpu.set_quant_amx(amx)
    bq.matmul(x, qw, x_scale=sx, out=out)

def t_torch():
    torch._int_mm(tx, tw)

def best(fn, reps=20):
    fn(); ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    return np.median(ts) * 1e3, min(ts) * 1e3

cases = [("torch._int_mm", t_torch), ("braze VNNI", lambda: t_braze(False))]
if amx0:
    cases.insert(1, ("braze AMX", lambda: t_braze(True)))
res = {n: [] for n, _ in cases}
for r in range(rounds):
    for n, f in cases:
        res[n].append(best(f))
for n, v in res.items():
    print(f"{n:14s} median ms per round: " + " ".join(f"{a:.2f}" for a, _ in v) + "   min: " + " ".join(f"{b:.2f}" for _, b in v))
# correctness spot check
braze._cpu.set_quant_amx(amx0)
y = bq.matmul(x, qw, x_scale=sx, out_dtype="float32")
ref = torch._int_mm(tx, tw).numpy().astype(np.float32)
print("equal to _int_mm:", np.array_equal(y, ref), "amx:", amx0, "threads", threads, "shape", (M, N, K))
