#include "core/attention.h"

#include <cmath>

#include "core/format.h"

namespace braze::attention {

bool supported_head_dim(int64_t d) {
  return d == 64 || d == 80 || d == 96 || d == 128 || d == 192 || d == 256;
}

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// t must have `ndim` axes (named `layout` in the message) with a contiguous
// last axis and non-negative strides (kernels walk forwards; Metal's strides
// are unsigned).
void require_layout(const Tensor& t, int ndim, const char* layout) {
  if (t.ndim != ndim)
    throw ValueError(std::string(t.name) + " must have " + str(ndim) + " axes " + layout + ", got shape " +
                     shape_str(t));
  if (t.numel() == 0) return;  // nothing is read or written: strides do not matter
  if (t.shape[ndim - 1] > 1 && t.stride[ndim - 1] != 1)
    throw ValueError(std::string(t.name) + ": head_dim (the last axis) must be contiguous (stride 1), got stride " +
                     str(t.stride[ndim - 1]));
  for (int i = 0; i < ndim - 1; ++i)
    if (t.stride[i] < 0 && t.shape[i] > 1)
      throw ValueError(std::string(t.name) + ": negative strides are not supported; make it contiguous first");
}

void require_head_dim(const Tensor& t) {
  const int64_t d = t.shape[t.ndim - 1];
  if (!supported_head_dim(d))
    throw ValueError(std::string(t.name) + ": head_dim must be one of 64, 80, 96, 128, 192, 256, got " + str(d));
}

void require_int32_matrix(const Tensor& t, int64_t rows, const char* what) {
  require_dtype(t, DType::i32);
  if (t.ndim != 2 || t.shape[0] != rows)
    throw ValueError(std::string(t.name) + " must have shape (" + str(rows) + ", max_blocks) (" + what +
                     "), got " + shape_str(t));
  if (t.shape[1] > 1 && t.stride[1] != 1) throw ValueError(std::string(t.name) + ": its rows must be contiguous");
  if (t.shape[0] > 1 && t.stride[0] < 0)
    throw ValueError(std::string(t.name) + ": negative strides are not supported; make it contiguous first");
}

// An output must not overlap itself (a broadcast view) nor any input.
void require_writable_apart(const Tensor& out, std::initializer_list<const Tensor*> ins) {
  if (!out.defined()) return;
  Axis ax[kMaxDims] = {};
  for (int i = 0; i < out.ndim; ++i) ax[i] = {out.shape[i], out.stride[i]};
  bool overlap = false;
  switch (out.ndim) {
    case 1: overlap = may_self_overlap({ax[0]}); break;
    case 2: overlap = may_self_overlap({ax[0], ax[1]}); break;
    case 3: overlap = may_self_overlap({ax[0], ax[1], ax[2]}); break;
    case 4: overlap = may_self_overlap({ax[0], ax[1], ax[2], ax[3]}); break;
    default: break;
  }
  if (overlap)
    throw ValueError(std::string(out.name) + ": its elements overlap (a broadcast view cannot be written)");
  for (const Tensor* in : ins) require_disjoint(out, *in);
}

Options options(const Tensor& q, int64_t q_heads, double scale, int64_t window, const Tensor& sinks,
                double softcap) {
  Options o{};
  const int64_t d = q.shape[q.ndim - 1];
  if (!std::isnan(scale) && !(std::isfinite(scale) && scale > 0))
    throw ValueError("scale must be a finite number > 0 (or None for 1/sqrt(head_dim)), got " + repr_float(scale));
  o.scale = std::isnan(scale) ? float(1.0 / std::sqrt(double(d))) : float(scale);
  if (window < 0) throw ValueError("window must be a positive number of keys (or None), got " + str(window));
  o.window = window;
  if (!(softcap >= 0) || !std::isfinite(softcap))
    throw ValueError("softcap must be a finite number > 0 (or None), got " + repr_float(softcap));
  o.softcap = float(softcap);
  if (sinks.defined()) {
    require_float(sinks);
    require_vector(sinks, q_heads, "one logit per query head");
    o.sinks = sinks.data;
    o.sinks_dtype = sinks.dtype;
  }
  return o;
}

Outputs outputs(const Tensor& q, const Tensor& out, const Tensor& lse, int64_t rows, int64_t heads) {
  Outputs o{};
  require_dtype(out, q.dtype);
  require_shape(out, q);
  require_layout(out, 3, "[tokens, Hq, head_dim]");
  o.out = out.data;
  o.out_stride_t = out.stride[0];
  o.out_stride_h = out.stride[1];
  if (lse.defined()) {
    require_dtype(lse, DType::f32);
    const int64_t want[2] = {rows, heads};
    require_shape(lse, want, 2, "q's shape without head_dim");
    if (lse.stride[0] < 0 || lse.stride[1] < 0)
      throw ValueError(std::string(lse.name) + ": negative strides are not supported");
    o.lse = static_cast<float*>(lse.data);
    o.lse_stride_t = lse.stride[0];
    o.lse_stride_h = lse.stride[1];
  }
  return o;
}

Workspace workspace(const Tensor& ws) {
  Workspace w;
  if (!ws.defined()) return w;
  if (ws.ndim != 1 || (ws.shape[0] > 1 && ws.stride[0] != 1))
    throw ValueError(std::string(ws.name) + " must be a contiguous 1-D byte array");
  w.data = ws.data;
  w.bytes = ws.shape[0] * dtype_size(ws.dtype);
  return w;
}

// The paged cache's checks, against q [rows, Hq, D].
PagedKv paged(const Tensor& q, const Tensor& kc, const Tensor& vc, const Tensor& bt, const Tensor& lens,
              int64_t batch) {
  require_dtype(kc, q.dtype);
  require_dtype(vc, q.dtype);
  require_layout(kc, 4, "[num_blocks, block_size, Hkv, head_dim]");
  require_shape(vc, kc);
  require_layout(vc, 4, "[num_blocks, block_size, Hkv, head_dim]");
  if (kc.shape[3] != q.shape[2])
    throw ValueError(std::string(kc.name) + ": head_dim " + str(kc.shape[3]) + " differs from q's " + str(q.shape[2]));
  const int64_t hq = q.shape[1], hkv = kc.shape[2];
  if (hkv == 0 || hq % hkv)
    throw ValueError(std::string(kc.name) + ": its " + str(hkv) + " kv heads must divide q's " + str(hq) +
                     " heads (GQA groups)");
  if (kc.shape[1] < 1) throw ValueError(std::string(kc.name) + ": block_size must be >= 1");
  require_int32_matrix(bt, batch, "one row of block ids per sequence");
  require_dtype(lens, DType::i32);
  require_vector(lens, batch, "one length per sequence");
  PagedKv p{};
  p.k = kc.data;
  p.k_stride_b = kc.stride[0];
  p.k_stride_s = kc.stride[1];
  p.k_stride_h = kc.stride[2];
  p.v = vc.data;
  p.v_stride_b = vc.stride[0];
  p.v_stride_s = vc.stride[1];
  p.v_stride_h = vc.stride[2];
  p.num_blocks = kc.shape[0];
  p.block_size = kc.shape[1];
  p.block_table = static_cast<const int32_t*>(bt.data);
  p.bt_stride = bt.stride[0];
  p.max_blocks = bt.shape[1];
  p.kv_lens = static_cast<const int32_t*>(lens.data);
  return p;
}

void require_q(const Tensor& q) {
  require_float(q);
  require_layout(q, 3, "[tokens, Hq, head_dim]");
  require_head_dim(q);
}

}  // namespace

AppendKvArgs prepare_append_kv(const Tensor& k, const Tensor& v, const Tensor& kc, const Tensor& vc,
                               const Tensor& slots) {
  require_float(k);
  require_layout(k, 3, "[tokens, Hkv, head_dim]");
  require_head_dim(k);
  require_dtype(v, k.dtype);
  require_shape(v, k);
  require_layout(v, 3, "[tokens, Hkv, head_dim]");
  require_dtype(kc, k.dtype);
  require_dtype(vc, k.dtype);
  require_layout(kc, 4, "[num_blocks, block_size, Hkv, head_dim]");
  require_shape(vc, kc);
  require_layout(vc, 4, "[num_blocks, block_size, Hkv, head_dim]");
  if (kc.shape[2] != k.shape[1] || kc.shape[3] != k.shape[2])
    throw ValueError(std::string(kc.name) + ": (Hkv, head_dim) = (" + str(kc.shape[2]) + ", " + str(kc.shape[3]) +
                     ") differs from k's (" + str(k.shape[1]) + ", " + str(k.shape[2]) + ")");
  if (slots.dtype != DType::i32 && slots.dtype != DType::i64)
    throw TypeError(std::string(slots.name) + " must be int32 or int64, got " + dtype_name(slots.dtype));
  if (slots.ndim != 1 || slots.shape[0] != k.shape[0])
    throw ValueError(std::string(slots.name) + " must have shape (" + str(k.shape[0]) + ",) (one slot per token), got " +
                     shape_str(slots));
  if (slots.shape[0] > 1 && slots.stride[0] < 0)
    throw ValueError(std::string(slots.name) + ": negative strides are not supported");
  require_writable_apart(kc, {&k, &v, &slots});
  require_writable_apart(vc, {&k, &v, &slots, &kc});
  require_same_device({&k, &v, &kc, &vc, &slots});
  AppendKvArgs a{};
  a.dtype = k.dtype;
  a.slot_dtype = slots.dtype;
  a.tokens = k.shape[0];
  a.heads = k.shape[1];
  a.dim = k.shape[2];
  a.num_blocks = kc.shape[0];
  a.block_size = kc.shape[1];
  a.k = k.data;
  a.k_stride_t = k.stride[0];
  a.k_stride_h = k.stride[1];
  a.v = v.data;
  a.v_stride_t = v.stride[0];
  a.v_stride_h = v.stride[1];
  a.k_cache = kc.data;
  a.kc_stride_b = kc.stride[0];
  a.kc_stride_s = kc.stride[1];
  a.kc_stride_h = kc.stride[2];
  a.v_cache = vc.data;
  a.vc_stride_b = vc.stride[0];
  a.vc_stride_s = vc.stride[1];
  a.vc_stride_h = vc.stride[2];
  a.slots = slots.data;
  a.slot_stride = slots.shape[0] > 1 ? slots.stride[0] : 1;
  a.device = k.device;
  a.device_id = k.device_id;
  return a;
}

DecodeArgs prepare_decode(const Tensor& q, const Tensor& kc, const Tensor& vc, const Tensor& bt, const Tensor& lens,
                          double scale, int64_t window, const Tensor& sinks, double softcap, const Tensor& out,
                          const Tensor& lse, const Tensor& ws) {
  require_q(q);
  const int64_t batch = q.shape[0];
  DecodeArgs a{};
  a.kv = paged(q, kc, vc, bt, lens, batch);
  a.opt = options(q, q.shape[1], scale, window, sinks, softcap);
  a.o = outputs(q, out, lse, batch, q.shape[1]);
  a.ws = workspace(ws);
  require_writable_apart(out, {&q, &kc, &vc, &bt, &lens, &sinks, &lse, &ws});
  require_writable_apart(lse, {&q, &kc, &vc, &bt, &lens, &sinks, &ws});
  require_same_device({&q, &kc, &vc, &bt, &lens, &sinks, &out, &lse, &ws});
  a.dtype = q.dtype;
  a.batch = batch;
  a.q_heads = q.shape[1];
  a.kv_heads = kc.shape[2];
  a.dim = q.shape[2];
  a.q = q.data;
  a.q_stride_b = q.stride[0];
  a.q_stride_h = q.stride[1];
  a.device = q.device;
  a.device_id = q.device_id;
  return a;
}

namespace {
void require_cu_seqlens(const Tensor& cu) {
  require_dtype(cu, DType::i32);
  if (cu.ndim != 1 || cu.shape[0] < 1)
    throw ValueError(std::string(cu.name) + " must have shape (batch + 1,), got " + shape_str(cu));
  if (cu.shape[0] > 1 && cu.stride[0] != 1) throw ValueError(std::string(cu.name) + " must be contiguous");
}

void fill_common(PrefillArgs& a, const Tensor& q, const Tensor& cu) {
  a.dtype = q.dtype;
  a.batch = cu.shape[0] - 1;
  a.tokens = q.shape[0];
  a.q_heads = q.shape[1];
  a.dim = q.shape[2];
  a.q = q.data;
  a.q_stride_t = q.stride[0];
  a.q_stride_h = q.stride[1];
  a.cu_seqlens = static_cast<const int32_t*>(cu.data);
  a.device = q.device;
  a.device_id = q.device_id;
}
}  // namespace

PrefillArgs prepare_prefill(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu, bool causal,
                            double scale, int64_t window, const Tensor& sinks, double softcap, const Tensor& out,
                            const Tensor& lse, const Tensor& ws) {
  require_q(q);
  require_dtype(k, q.dtype);
  require_dtype(v, q.dtype);
  require_layout(k, 3, "[tokens, Hkv, head_dim]");
  require_shape(v, k);
  require_layout(v, 3, "[tokens, Hkv, head_dim]");
  if (k.shape[0] != q.shape[0])
    throw ValueError(std::string(k.name) + " must have q's " + str(q.shape[0]) + " tokens (cu_seqlens is shared), got " +
                     str(k.shape[0]));
  if (k.shape[2] != q.shape[2])
    throw ValueError(std::string(k.name) + ": head_dim " + str(k.shape[2]) + " differs from q's " + str(q.shape[2]));
  const int64_t hq = q.shape[1], hkv = k.shape[1];
  if (hkv == 0 || hq % hkv)
    throw ValueError(std::string(k.name) + ": its " + str(hkv) + " kv heads must divide q's " + str(hq) +
                     " heads (GQA groups)");
  require_cu_seqlens(cu);
  PrefillArgs a{};
  fill_common(a, q, cu);
  a.causal = causal;
  a.paged = false;
  a.kv_heads = hkv;
  a.k = k.data;
  a.k_stride_t = k.stride[0];
  a.k_stride_h = k.stride[1];
  a.v = v.data;
  a.v_stride_t = v.stride[0];
  a.v_stride_h = v.stride[1];
  a.opt = options(q, hq, scale, window, sinks, softcap);
  a.o = outputs(q, out, lse, q.shape[0], hq);
  a.ws = workspace(ws);
  require_writable_apart(out, {&q, &k, &v, &cu, &sinks, &lse, &ws});
  require_writable_apart(lse, {&q, &k, &v, &cu, &sinks, &ws});
  require_same_device({&q, &k, &v, &cu, &sinks, &out, &lse, &ws});
  return a;
}

PrefillArgs prepare_prefill_paged(const Tensor& q, const Tensor& kc, const Tensor& vc, const Tensor& bt,
                                  const Tensor& cu, const Tensor& lens, double scale, int64_t window,
                                  const Tensor& sinks, double softcap, const Tensor& out, const Tensor& lse,
                                  const Tensor& ws) {
  require_q(q);
  require_cu_seqlens(cu);
  PrefillArgs a{};
  fill_common(a, q, cu);
  a.causal = true;
  a.paged = true;
  a.kv = paged(q, kc, vc, bt, lens, a.batch);
  a.kv_heads = kc.shape[2];
  a.opt = options(q, q.shape[1], scale, window, sinks, softcap);
  a.o = outputs(q, out, lse, q.shape[0], q.shape[1]);
  a.ws = workspace(ws);
  require_writable_apart(out, {&q, &kc, &vc, &bt, &cu, &lens, &sinks, &lse, &ws});
  require_writable_apart(lse, {&q, &kc, &vc, &bt, &cu, &lens, &sinks, &ws});
  require_same_device({&q, &kc, &vc, &bt, &cu, &lens, &sinks, &out, &lse, &ws});
  return a;
}

MergeArgs prepare_merge_states(const Tensor& oa, const Tensor& la, const Tensor& ob, const Tensor& lb,
                               const Tensor& out, const Tensor& lse) {
  require_float(oa);
  require_layout(oa, 3, "[tokens, H, head_dim]");
  require_dtype(ob, oa.dtype);
  require_shape(ob, oa);
  require_layout(ob, 3, "[tokens, H, head_dim]");
  const int64_t want[2] = {oa.shape[0], oa.shape[1]};
  for (const Tensor* l : {&la, &lb}) {
    require_dtype(*l, DType::f32);
    require_shape(*l, want, 2, "o's shape without head_dim");
    if (l->stride[0] < 0 || l->stride[1] < 0)
      throw ValueError(std::string(l->name) + ": negative strides are not supported");
  }
  MergeArgs a{};
  a.o = outputs(oa, out, lse, oa.shape[0], oa.shape[1]);
  require_writable_apart(out, {&oa, &la, &ob, &lb, &lse});
  require_writable_apart(lse, {&oa, &la, &ob, &lb});
  require_same_device({&oa, &la, &ob, &lb, &out, &lse});
  a.dtype = oa.dtype;
  a.tokens = oa.shape[0];
  a.heads = oa.shape[1];
  a.dim = oa.shape[2];
  a.oa = oa.data;
  a.oa_stride_t = oa.stride[0];
  a.oa_stride_h = oa.stride[1];
  a.la = static_cast<const float*>(la.data);
  a.la_stride_t = la.stride[0];
  a.la_stride_h = la.stride[1];
  a.ob = ob.data;
  a.ob_stride_t = ob.stride[0];
  a.ob_stride_h = ob.stride[1];
  a.lb = static_cast<const float*>(lb.data);
  a.lb_stride_t = lb.stride[0];
  a.lb_stride_h = lb.stride[1];
  a.device = oa.device;
  a.device_id = oa.device_id;
  return a;
}

void check_slots(const AppendKvArgs& a) {
  const int64_t cap = a.num_blocks * a.block_size;
  for (int64_t t = 0; t < a.tokens; ++t) {
    const int64_t s = a.slot_dtype == DType::i64 ? static_cast<const int64_t*>(a.slots)[t * a.slot_stride]
                                                 : static_cast<const int32_t*>(a.slots)[t * a.slot_stride];
    if (s < -1 || s >= cap)
      throw ValueError("slot_mapping[" + str(t) + "] = " + str(s) + " is outside the cache's " + str(cap) +
                       " slots (-1 skips a token)");
  }
}

void check_paged(const PagedKv& kv, int64_t batch) {
  const int64_t cap = kv.max_blocks * kv.block_size;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = kv.kv_lens[b];
    if (len < 0 || len > cap)
      throw ValueError("kv_lens[" + str(b) + "] = " + str(len) + " is outside [0, " + str(cap) +
                       "] (block_table's " + str(kv.max_blocks) + " blocks of " + str(kv.block_size) + ")");
    const int32_t* row = kv.block_table + b * kv.bt_stride;
    for (int64_t j = 0; j < (len + kv.block_size - 1) / kv.block_size; ++j)
      if (row[j] < 0 || row[j] >= kv.num_blocks)
        throw ValueError("block_table[" + str(b) + ", " + str(j) + "] = " + str(row[j]) +
                         " is not a block of the cache (" + str(kv.num_blocks) + " blocks)");
  }
}

void check_prefill(const PrefillArgs& a) {
  if (a.paged) check_paged(a.kv, a.batch);
  const int32_t* cu = a.cu_seqlens;
  if (cu[0] != 0) throw ValueError("cu_seqlens[0] must be 0, got " + str(cu[0]));
  for (int64_t b = 0; b < a.batch; ++b) {
    if (cu[b + 1] < cu[b])
      throw ValueError("cu_seqlens must not decrease, got cu_seqlens[" + str(b + 1) + "] = " + str(cu[b + 1]) +
                       " < " + str(cu[b]));
    if (a.paged && cu[b + 1] - cu[b] > a.kv.kv_lens[b])
      throw ValueError("kv_lens[" + str(b) + "] = " + str(a.kv.kv_lens[b]) + " is less than the sequence's " +
                       str(cu[b + 1] - cu[b]) + " new queries (they sit at the end of its cached tokens)");
  }
  if (cu[a.batch] != a.tokens)
    throw ValueError("cu_seqlens[-1] must be q's token count " + str(a.tokens) + ", got " + str(cu[a.batch]));
}

}  // namespace braze::attention
