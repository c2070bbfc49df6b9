"""shaders/metal stays inside the MSL subset (tests/mtlsim/lint_msl.py)."""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from mtlsim.lint_msl import lint_source, lint_tree  # noqa: E402


def test_shaders_pass_the_msl_lint():
    root = HERE.parent / "shaders" / "metal"
    assert sorted(root.rglob("*.metal")), "no shaders found"
    assert lint_tree(root) == []


def test_lint_rejects_std_double_and_recursion():
    bad = """
    #include <metal_stdlib>
    // std::vector in a comment and "double" in a string are fine
    inline float twice(float x) { return std::max(x, 0.0f) * 2; }
    inline double widen(float x) { return x; }
    inline uint depth(uint n) { return n == 0 ? 0 : 1 + depth(n - 1); }
    template <typename T> T walk(T n) { if (n > 0) { return walk<T>(n - 1); } return n; }
    inline float fine(float x) { return metal::max(x, 1.0f); }
    """
    found = lint_source(bad, "bad.metal")
    assert any("std::" in f and ":4:" in f for f in found), found
    assert any("double" in f and ":5:" in f for f in found), found
    assert any("`depth` calls itself" in f for f in found), found
    assert any("`walk` calls itself" in f for f in found), found
    assert not any("fine" in f for f in found), found
    assert len(found) == 4, found
