"""Builds simulator libraries: .metal -> (g++ -E) -> rewrite.py -> C++ -> .so.

``build_metal_module()`` builds the simulated ``braze._metal``: the real
backend module (csrc/metal/module.cpp, the shared bindings and core checks,
the launch plans) linked with every shader of shaders/metal and the
simulator's executor instead of the Objective-C++ one. ``build()`` builds a
plain kernel library for tests that dispatch kernels themselves.

Libraries are cached under tests/mtlsim/.build/<hash>/, keyed by every input
file and the flags. MTLSIM_SANITIZE=1 builds with ASan + UBSan.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sysconfig
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
    """Runs the compiler jobs, as many at a time as there are CPUs."""
    width = max(1, len(os.sched_getaffinity(0)))
    errors, running = [], []
    queue = list(jobs)
    while queue or running:
        while queue and len(running) < width:
            j = queue.pop(0)
            running.append((j, subprocess.Popen(j, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
        j, p = running.pop(0)
        out, _ = p.communicate()
        if p.returncode:
            errors.append(" ".join(j) + "\n" + out)
    if errors:
        raise RuntimeError("simulator build failed:\n" + "\n".join(errors))


def _nanobind():
    """(include dirs, nb_combined.cpp) of the installed nanobind (a test dependency)."""
    import nanobind

    root = Path(nanobind.__file__).resolve().parent
    incs = [root / "include", root / "ext" / "robin_map" / "include", Path(sysconfig.get_paths()["include"])]
    return incs, root / "src" / "nb_combined.cpp", nanobind.__version__


def _nanobind_object() -> Path:
    """nanobind's runtime compiled once per version and flags (it is slow to build)."""
    incs, src, version = _nanobind()
    h = hashlib.sha256((version + " ".join(_flags())).encode()).hexdigest()[:16]
    obj = BUILD / f"nanobind-{h}.o"
    if not obj.exists():
        BUILD.mkdir(parents=True, exist_ok=True)
        tmp = BUILD / f".nanobind-{h}-{os.getpid()}.o"
        _compile_all([["g++", "-std=c++17", *_flags(), "-fvisibility=hidden", "-DNB_COMPACT_ASSERTIONS",
                       *[f"-I{i}" for i in incs], "-c", str(src), "-o", str(tmp)]])
        tmp.replace(obj)
    return obj


def build_metal_module() -> Path:
    """The simulated braze._metal extension module (see the module docstring)."""
    shaders = sorted(SHADERS.rglob("*.metal"))
    csrc = ROOT / "csrc"
    host = ([HERE / "executor_sim.cpp", csrc / "metal" / "module.cpp"]
            + sorted((csrc / "metal" / "plans").glob("*.cpp")) + sorted((csrc / "core").glob("*.cpp"))
            + sorted(p for p in (csrc / "bindings").glob("*.cpp") if not p.name.startswith("module_")))
    extra = ([p for d in (csrc / "core", csrc / "bindings") for p in sorted(d.glob("*.h"))]
             + sorted((csrc / "core").glob("*/*.h")) + [csrc / "metal" / "executor.h"])  # core/quant/ codecs too
    incs, _, _ = _nanobind()
    name = "_metal" + sysconfig.get_config_var("EXT_SUFFIX")
    return build("metal_module", shaders, host, extra_inputs=extra,
                 include_dirs=[csrc, csrc / "metal", *incs],
                 host_flags=["-fvisibility=hidden", "-DNB_COMPACT_ASSERTIONS"],
                 extra_objects=[_nanobind_object()], lib_name=name)


def build(name: str, metal_files: list[Path], host_sources: list[Path], *, extra_inputs=(),
          include_dirs=(), host_flags=(), extra_objects=(), lib_name=None) -> Path:
    """Shared library with the kernels of `metal_files`, the runtime and `host_sources`."""
    metal_files = [Path(m) for m in metal_files]
    host_sources = [Path(h) for h in host_sources]
    h = hashlib.sha256(" ".join(_flags() + list(host_flags) + list(map(str, include_dirs))).encode())
    for f in _inputs(metal_files + host_sources + list(extra_inputs)) + list(extra_objects):
        h.update(str(f).encode())
        h.update(Path(f).read_bytes())
    out_dir = BUILD / f"{name}-{h.hexdigest()[:16]}"
    lib = out_dir / (lib_name or f"lib{name}.so")
    if lib.exists():
        return lib
    BUILD.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=BUILD, prefix=f".{name}-"))
    try:
        inc = ["-I", str(HERE / "include"), "-I", str(HERE), "-I", str(PLANS), "-I", str(SHADERS)]
        host_inc = inc + [f"-I{d}" for d in include_dirs]
        jobs, objs = [], []
        for m in metal_files:
            stem = f"{m.parent.name}_{m.stem}"
            cpp = work / f"{stem}.msl.cpp"
            cpp.write_text(translate(m))
            objs.append(work / f"{stem}.msl.o")
            jobs.append(["g++", "-std=c++14", *_flags(), *inc, "-c", str(cpp), "-o", str(objs[-1])])
        for i, src in enumerate([HERE / "runtime.cpp", *host_sources]):
            objs.append(work / f"{i}_{src.stem}.o")
            jobs.append(["g++", "-std=c++17", *_flags(), *host_flags, *host_inc, "-c", str(src), "-o", str(objs[-1])])
        _compile_all(jobs)
        _compile_all([["g++", "-shared", *_flags(), *map(str, objs), *map(str, extra_objects),
                       "-o", str(work / lib.name)]])
        try:
            work.rename(out_dir)
        except OSError:  # built concurrently by another process
            pass
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return lib
