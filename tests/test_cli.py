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
