#!/usr/bin/env bash
# FlashInfer for a GPU machine that cannot download (the peer of `braze bench --family attention` on
# CUDA, issue 16): FlashInfer 0.7.2 (a 62 MB pure-Python wheel whose kernels compile at first use with
# nvcc and ninja) with the two packages `import flashinfer` needs beyond that machine's (apache-tvm-ffi,
# nvidia-ml-py), unpacked for Python 3.12 and trimmed to fit one call's carry: the sources of the
# families braze does not bench (flashinfer/data/csrc/*/, the MoE and experimental .cu files) go.
# Output: .fi/fisite.tgz (about 30 MB). On the GPU machine (carry .fi, .whl):
#   tar xzf .fi/fisite.tgz -C /tmp/site && export PYTHONPATH=/tmp/site FLASHINFER_WORKSPACE_BASE=/tmp/fiws \
#     FLASHINFER_CUDA_ARCH_LIST=9.0
# Then `python scripts/flashinfer_warm.py` compiles the JIT modules the bench uses (paged decode ~12 s, the sm90
# single prefill ~60 s on 16 cores) into /tmp/fiws and checks them against the torch peers; a later call on
# the same warm machine (carrying the braze wheel instead: the two exceed one call's carry) runs
# `braze bench --backend cuda --family attention` with FlashInfer beside torch.
set -eu
out=${1:-.fi}
tmp=$(mktemp -d)
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$tmp/w" "$@"; }
dl flashinfer-python==0.7.2 "apache-tvm-ffi>=0.1.11,<0.2" nvidia-ml-py
mkdir -p "$tmp/site" "$out"
for w in "$tmp"/w/*.whl; do (cd "$tmp/site" && unzip -q -o "$w"); done
cd "$tmp/site"
find flashinfer/data/csrc -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
find flashinfer/fused_moe flashinfer/experimental flashinfer/moe_ep -type f \
  \( -name "*.cu" -o -name "*.cuh" -o -name "*.c" -o -name "*.h" \) -delete
cd - > /dev/null
tar czf "$out/fisite.tgz" -C "$tmp/site" .
rm -rf "$tmp"
ls -la "$out/fisite.tgz"
