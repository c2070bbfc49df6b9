"""Type-check csrc/metal/*.mm as Objective-C++ on any machine, without Apple's SDK.

libclang parses each file against tests/objc/include (declarations of the Metal
and Foundation API written from Apple's documented signatures) and the system
C++ compiler's standard headers. A misspelt selector, a wrong argument type or a
C++ error in the executor shows up here as an error diagnostic; see
docs/metal.md for what this cannot prove.

    python tests/objc/check.py            # exit 1 and print the errors, if any
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DECLS = HERE / "include"

# Warnings that mean "the code does not match the declared API". Apple's clang
# reports some of them as warnings only, but each is a real bug here.
API_MISMATCH = [
    "objc-method-access",         # selector not declared by the receiver's protocols
    "incompatible-pointer-types",
    "int-conversion",
]


@functools.lru_cache(maxsize=None)
def system_includes() -> tuple[str, ...]:
    """The host C++ compiler's <...> search list: the libclang wheel ships no
    C++ standard library (nor clang's own builtin headers)."""
    for cxx in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        exe = cxx and shutil.which(cxx)
        if not exe:
            continue
        try:
            out = subprocess.run([exe, "-E", "-x", "c++", "-", "-v"], stdin=subprocess.DEVNULL,
                                 capture_output=True, text=True, timeout=30).stderr
        except (OSError, subprocess.TimeoutExpired):
            continue
        dirs, inside = [], False
        for line in out.splitlines():
            if line.startswith("#include <...> search starts here"):
                inside = True
            elif line.startswith("End of search list"):
                break
            elif inside and not line.rstrip().endswith("(framework directory)"):
                dirs.append(line.strip())
        if dirs:
            return tuple(dirs)
    return ()


def _optional_includes() -> list[str]:
    """Python and nanobind headers, for a .mm that includes nanobind."""
    args = ["-isystem", sysconfig.get_paths()["include"]]
    try:
        import nanobind
    except ImportError:
        return args
    return args + ["-isystem", nanobind.include_dir()]


def clang_args() -> list[str]:
    args = ["-x", "objective-c++", "-std=c++17", "-fobjc-arc", "-fblocks",
            "-fobjc-runtime=macosx-14.0", "-fsyntax-only",
            "-I", str(ROOT / "csrc"), "-I", str(ROOT / "csrc" / "metal"),
            "-I", str(ROOT / "shaders" / "metal"),
            # Before the system dirs, so these stand in for the SDK's frameworks.
            "-isystem", str(DECLS)]
    args += [f"-Werror={w}" for w in API_MISMATCH]
    args += _optional_includes()
    for d in system_includes():
        args += ["-isystem", d]
    return args


def check_source(path: Path, text: str | None = None) -> list[str]:
    """Error diagnostics ("file:line:col: message") of one Objective-C++ file;
    `text` replaces the file's contents (the file need not exist)."""
    from clang import cindex

    unsaved = [(str(path), text)] if text is not None else None
    tu = cindex.Index.create().parse(str(path), args=clang_args(), unsaved_files=unsaved)
    errors = []
    for d in tu.diagnostics:
        if d.severity < cindex.Diagnostic.Error:
            continue
        loc = d.location
        where = f"{loc.file.name}:{loc.line}:{loc.column}" if loc.file else str(path)
        errors.append(f"{where}: {d.spelling}")
    return errors


def sources() -> list[Path]:
    return sorted((ROOT / "csrc" / "metal").glob("*.mm"))


def check_tree() -> list[str]:
    return [e for p in sources() for e in check_source(p)]


if __name__ == "__main__":
    found = check_tree()
    print("\n".join(found) if found else f"{len(sources())} Objective-C++ files: no errors")
    sys.exit(1 if found else 0)
