// CUDA entries of the attention family: each runs validated Args on the
// arrays' device, on `stream` (the producer's cudaStream_t; 0 = the legacy
// default stream). They never synchronize and allocate nothing: decode's
// split-K partial states go to the caller's workspace.
#pragma once
#include <cstdint>
#include <string>

#include "core/attention.h"

namespace braze::cuda {
void append_kv_run(const attention::AppendKvArgs& a, uintptr_t stream);
void decode_run(const attention::DecodeArgs& a, uintptr_t stream);
void prefill_run(const attention::PrefillArgs& a, uintptr_t stream);
void merge_states_run(const attention::MergeArgs& a, uintptr_t stream);
// Bytes of the uint8 workspace `op` needs for `rows` query rows (decode: the
// batch) of `q_heads` x `head_dim` over a block table of `max_blocks` columns
// of `block_size` keys on `device`; 0 when the op takes none. From shapes only
// (kv_lens is never read on the host).
int64_t attention_workspace_bytes(const std::string& op, DType dtype, int64_t rows, int64_t q_heads,
                                  int64_t head_dim, int64_t max_blocks, int64_t block_size, int device);
}  // namespace braze::cuda
