"""Lint for shaders/metal: keeps the shaders inside the MSL subset that both
Apple's compiler and the simulator accept. Rejects `std::` (MSL has metal::),
`double` (no double on Apple GPUs) and recursion (a function calling itself;
MSL forbids recursion)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"')
_FUNC = re.compile(r"\b([A-Za-z_]\w*)\s*\([^;{}()]*(?:\([^()]*\)[^;{}()]*)*\)\s*(?:const\s*)?\{")
_KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "decltype"}


def _strip(src: str) -> str:
    keep_lines = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # noqa: E731
    return _STRINGS.sub(keep_lines, _COMMENTS.sub(keep_lines, src))


def _body_end(src: str, open_brace: int) -> int:
    depth = 0
    for i in range(open_brace, len(src)):
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        if depth == 0:
            return i
    return len(src)


def lint_source(src: str, name: str = "<msl>") -> list[str]:
    code = _strip(src)
    line = lambda pos: code.count("\n", 0, pos) + 1  # noqa: E731
    problems = [f"{name}:{line(m.start())}: `std::` is not MSL (use metal::)"
                for m in re.finditer(r"\bstd\s*::", code)]
    problems += [f"{name}:{line(m.start())}: `double` is not supported on Apple GPUs"
                 for m in re.finditer(r"\bdouble\b", code)]
    for m in _FUNC.finditer(code):
        fn = m.group(1)
        if fn in _KEYWORDS:
            continue
        start = m.end() - 1
        body = code[start + 1:_body_end(code, start)]
        if re.search(r"(?<![\w.>])" + re.escape(fn) + r"\s*(?:<[^;{}()]*>)?\s*\(", body):
            problems.append(f"{name}:{line(m.start())}: `{fn}` calls itself (recursion)")
    return problems


def lint_tree(root: Path) -> list[str]:
    problems = []
    for p in sorted(root.rglob("*")):
        if p.suffix in (".metal", ".h") and p.is_file():
            problems += lint_source(p.read_text(), str(p.relative_to(root.parent.parent)))
    return problems


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[2] / "shaders" / "metal"
    found = lint_tree(root)
    print("\n".join(found) or "ok")
    sys.exit(1 if found else 0)
