"""Source rewriter: preprocessed MSL -> C++ for the simulator.

Handles what the shim's macros cannot (docs/metal.md lists the subset):
  * kernel-scope ``threadgroup T name[N]...;`` -> storage shared by the
    threadgroup (``mtlsim::tg_alloc``), identical for every thread;
  * ``[[...]]`` attributes: kernel parameter attributes become a binding table,
    ``template [[host_name("x")]] [[kernel]] decltype(f<A>) f<A>;``
    instantiations (and plain ``kernel`` functions) become registered entries;
  * half literals (``1.5h``) and rvalue swizzles (``v.xy`` -> ``v.xy()``).
"""
from __future__ import annotations

import re

BUILTINS = (
    "thread_position_in_grid", "thread_position_in_threadgroup",
    "threadgroup_position_in_grid", "threads_per_threadgroup", "threadgroups_per_grid",
    "threads_per_grid", "thread_index_in_threadgroup", "thread_index_in_simdgroup",
    "simdgroup_index_in_threadgroup", "simdgroups_per_threadgroup", "threads_per_simdgroup",
)


class RewriteError(ValueError):
    pass


def _balanced(text: str, start: int, open_ch: str, close_ch: str) -> int:
    """Index just past the bracket closing the one at ``text[start]``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
    raise RewriteError(f"unbalanced {open_ch}{close_ch} at offset {start}")


def _split_params(params: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in params:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


def _binding(param: str, kernel: str) -> str:
    m = re.search(r"\[\[\s*(\w+)\s*(?:\(\s*(\d+)\s*\))?\s*\]\]", param)
    if not m:
        raise RewriteError(f"kernel {kernel}: parameter without attribute: {param.strip()}")
    name, index = m.group(1), m.group(2)
    if name in ("buffer", "threadgroup") and index is not None:
        return f"{{mtlsim::BindKind::{name}, {index}}}"
    if name in BUILTINS:
        return f"{{mtlsim::BindKind::builtin, int(mtlsim::Builtin::{name})}}"
    raise RewriteError(f"kernel {kernel}: unsupported parameter attribute [[{m.group(0)[2:-2]}]]")


_KERNEL_DEF = re.compile(r"(?:\[\[\s*kernel\s*\]\]|\bkernel\b)\s*void\s+(\w+)\s*\(")
_INSTANCE = re.compile(
    r"template\s*\[\[\s*host_name\s*\(((?:\s*\"[^\"]*\")+)\s*\)\s*\]\]\s*"
    r"(?:\[\[\s*kernel\s*\]\]\s*)?decltype\s*\(\s*(\w+)\s*(<[^;]*?>)\s*\)\s*\2\s*<[^;]*?>\s*;"
)
_TG_ARRAY = re.compile(
    r"\bthreadgroup\s+((?:const\s+)?[A-Za-z_][\w:]*(?:\s*<[^;<>]*>)?)\s+(\w+)\s*((?:\[[^\]]+\]\s*)+);"
)


def rewrite(src: str) -> str:
    kernels: dict[str, list[str]] = {}
    for m in _KERNEL_DEF.finditer(src):
        end = _balanced(src, m.end() - 1, "(", ")")
        params = _split_params(src[m.end():end - 1])
        kernels[m.group(1)] = [_binding(p, m.group(1)) for p in params]

    entries = []  # (host name, callable expression, kernel name)

    def instance(m: re.Match) -> str:
        host = "".join(re.findall(r"\"([^\"]*)\"", m.group(1)))
        entries.append((host, f"{m.group(2)}{m.group(3)}", m.group(2)))
        return ""

    src = _INSTANCE.sub(instance, src)
    if "host_name" in src:
        raise RewriteError("host_name outside a `template [[host_name(..)]] [[kernel]] "
                           "decltype(f<..>) f<..>;` instantiation")
    templated = {k for _, _, k in entries}
    for name in kernels:
        if name not in templated and re.search(r"template\s*<[^;{]*>\s*(?:\[\[\s*kernel\s*\]\]|\bkernel\b)\s*void\s+" + name + r"\b", src) is None:
            entries.append((name, name, name))

    src = _TG_ARRAY.sub(
        lambda m: (f"auto& {m.group(2)} = *static_cast<{m.group(1)} (*){m.group(3).strip()}>("
                   f"mtlsim::tg_alloc(sizeof({m.group(1)}{m.group(3).strip()}), "
                   f"alignof({m.group(1)})));"), src)
    src = re.sub(r"\[\[[^\[\]]*\]\]", "", src)
    src = re.sub(r"(?<![\w.])((?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)[hH]\b", r"half(\1f)", src)
    src = re.sub(r"\.([xyzw]{2,4})\b(?!\s*\()", r".\1()", src)

    out = ['#include "mtlsim.h"', src, "// ---- simulator entries (generated) ----"]
    for i, (host, fn, kname) in enumerate(entries):
        binds = ", ".join(kernels[kname])
        out.append(
            f"static void mtlsim_entry_{i}(const mtlsim::ThreadCtx& c) {{\n"
            f"  static const mtlsim::Bind b[] = {{{binds}}};\n"
            f"  mtlsim::invoke(&{fn}, b, c);\n}}\n"
            f"static mtlsim::Registrar mtlsim_reg_{i}(\"{host}\", &mtlsim_entry_{i});")
    return "\n".join(out) + "\n"
