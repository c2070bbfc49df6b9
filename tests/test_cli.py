"""The `braze` command as a user runs it: each subcommand exits 0 and says what it should."""
import json
import subprocess
import sys

import pytest


def braze(*args):
    r = subprocess.run([sys.executable, "-m", "braze", *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_info_names_every_backend():
    out = braze("info")
    for b in ("cpu", "cuda", "metal"):
        assert f"backend {b}" in out
    assert "cpu isa: active" in out


def test_list_json_covers_the_registry():
    rows = json.loads(braze("list", "--json"))
    ops = {r["op"]: r for r in rows}
    assert ops["rms_norm"]["cpu"] == "yes"
    assert ops["rms_norm"]["metal"] in ("yes", "simulated")


def test_check_one_family():
    out = braze("check", "--family", "norm")
    assert "all passed" in out


def test_bench_json_schema(tmp_path):
    path = tmp_path / "b.json"
    args = ["bench", "--family", "norm", "--op", "rms_norm", "--peers", "numpy", "--json", str(path)]
    try:
        import matplotlib  # noqa: F401
        args += ["--plot", str(tmp_path / "roof.png")]
    except ImportError:
        pass
    out = braze(*args)
    assert "copy ceiling" in out
    report = json.loads(path.read_text())
    assert {"device", "backend", "commit", "ceiling_gbs", "rows"} <= set(report)
    row = report["rows"][0]
    assert {"op", "shape", "dtype", "backend", "impl", "ms", "gbs", "pct_ceiling", "max_err"} <= set(row)
    assert {r["impl"] for r in report["rows"]} == {"braze", "numpy"}
    assert all(r["ms"] > 0 and r["max_err"] < 1e-3 for r in report["rows"])


def test_bench_unknown_op_is_a_clear_error():
    r = subprocess.run([sys.executable, "-m", "braze", "bench", "--op", "no_such_op"], capture_output=True, text=True)
    assert r.returncode == 2 and "no op matches" in r.stderr


@pytest.mark.parametrize("cmd", [["--version"]])
def test_version(cmd):
    assert "braze" in braze(*cmd)


def test_bench_help_documents_options_families_and_ops():
    from braze import _spec

    out = braze("bench", "--help")
    for opt in ("--family", "--op", "--backend", "--dtype", "--full", "--json", "--plot", "--peers", "--no-progress"):
        line = next(ln for ln in out.splitlines() if ln.strip().startswith(opt))
        assert len(line.split(opt, 1)[1].strip()) > 3 or opt in ("--family", "--backend", "--dtype"), opt
    for s in _spec.ops():
        assert s.name in out
    for fam in _spec.FAMILIES:
        assert fam in out


def test_bench_plot_without_matplotlib_fails_before_timing(tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None; from braze.cli import main; "
            f"sys.exit(main(['bench', '--op', 'rms_norm', '--plot', r'{tmp_path / 'p.png'}']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--plot needs matplotlib" in r.stderr
    assert "copy ceiling" not in r.stdout  # nothing was timed


def test_bench_mask_ops_have_finite_max_err_and_no_runtime_warning(tmp_path):
    path = tmp_path / "b.json"
    r = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "braze", "bench", "--family", "sampling",
                        "--op", "top_k_mask", "--peers", "torch", "--json", str(path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = json.loads(path.read_text())["rows"]
    assert rows and all(row["max_err"] == 0.0 for row in rows if row["impl"] == "braze")


def test_max_err_compares_kept_sets():
    import numpy as np

    from braze.bench.harness import _max_err

    ref = np.array([[1.0, -np.inf, 2.0]])
    assert _max_err(np.array([[1.0, -np.inf, 2.5]]), ref) == 0.5
    assert _max_err(np.array([[1.0, 0.0, 2.0]]), ref) == np.inf  # a different kept set
