"""Builds simulator libraries: .metal -> (g++ -E) -> rewrite.py -> C++ -> .so.

Libraries are cached under tests/mtlsim/.build/<hash>/, keyed by every input
file and the flags. MTLSIM_SANITIZE=1 builds with ASan + UBSan.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .rewrite import rewrite

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SHADERS = ROOT / "shaders" / "metal"
PLANS = ROOT / "csrc" / "metal"
BUILD = HERE / ".build"


def sanitizing() -> bool:
    return os.environ.get("MTLSIM_SANITIZE", "") not in ("", "0")


def _flags() -> list[str]:
    f = ["-O1", "-g", "-fPIC", "-Wall", "-Wno-unused-variable", "-Wno-unused-but-set-variable",
         "-Wno-unused-local-typedefs"]
    if sanitizing():
        f += ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
              "-fno-omit-frame-pointer"]
    return f


def _inputs(extra: list[Path]) -> list[Path]:
    files = [p for d in (SHADERS, PLANS / "plans", HERE / "include", HERE / "msl_include")
             for p in sorted(d.rglob("*")) if p.is_file()]
    files += sorted(HERE.glob("*.cpp")) + sorted(HERE.glob("*.h")) + [HERE / "rewrite.py"]
    return files + [Path(p) for p in extra]


def translate(metal: Path) -> str:
    """The C++ text the simulator compiles for one .metal file."""
    pre = subprocess.run(
        ["g++", "-E", "-P", "-x", "c++", "-std=c++14", "-D__METAL_VERSION__=310",
         "-I", str(HERE / "msl_include"), "-I", str(SHADERS), str(metal)],
        check=True, capture_output=True, text=True).stdout
    return rewrite(pre)


def _compile_all(jobs: list[list[str]]) -> None:
    procs = [subprocess.Popen(j, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for j in jobs]
    errors = []
    for j, p in zip(jobs, procs):
        out, _ = p.communicate()
        if p.returncode:
            errors.append(" ".join(j) + "\n" + out)
    if errors:
        raise RuntimeError("simulator build failed:\n" + "\n".join(errors))


def build(name: str, metal_files: list[Path], host_sources: list[Path]) -> Path:
    """Shared library with the kernels of `metal_files`, the runtime and `host_sources`."""
    metal_files = [Path(m) for m in metal_files]
    host_sources = [Path(h) for h in host_sources]
    h = hashlib.sha256(" ".join(_flags()).encode())
    for f in _inputs(metal_files + host_sources):
        h.update(str(f).encode())
        h.update(f.read_bytes())
    out_dir = BUILD / f"{name}-{h.hexdigest()[:16]}"
    lib = out_dir / f"lib{name}.so"
    if lib.exists():
        return lib
    BUILD.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=BUILD, prefix=f".{name}-"))
    try:
        inc = ["-I", str(HERE / "include"), "-I", str(HERE), "-I", str(PLANS), "-I", str(SHADERS)]
        jobs, objs = [], []
        for m in metal_files:
            cpp = work / f"{m.stem}.msl.cpp"
            cpp.write_text(translate(m))
            objs.append(work / f"{m.stem}.msl.o")
            jobs.append(["g++", "-std=c++14", *_flags(), *inc, "-c", str(cpp), "-o", str(objs[-1])])
        for src in [HERE / "runtime.cpp", *host_sources]:
            objs.append(work / f"{src.stem}.o")
            jobs.append(["g++", "-std=c++17", *_flags(), *inc, "-c", str(src), "-o", str(objs[-1])])
        _compile_all(jobs)
        _compile_all([["g++", "-shared", *_flags(), *map(str, objs), "-o", str(work / lib.name)]])
        try:
            work.rename(out_dir)
        except OSError:  # built concurrently by another process
            pass
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return lib
