// The op table: each family lists its ops once, as an X-macro in its core
// header (BRAZE_NORM_OPS, BRAZE_SAMPLING_OPS, ...). The enum, the op names
// (which are the Python entry points and the Metal host-name stems), the
// launch plans and the simulator all derive from that one list, so nothing is
// kept in step by hand and nothing depends on declaration order.
#pragma once

#define BRAZE_OP_ENUM(name) name,
#define BRAZE_OP_NAME_CASE(name) \
  case Op::name:                 \
    return #name;

// Declares `enum class Op` and `const char* op_name(Op)` for a family's list.
#define BRAZE_DECLARE_OPS(LIST)                                   \
  enum class Op { LIST(BRAZE_OP_ENUM) };                          \
  inline const char* op_name(Op op) {                             \
    switch (op) { LIST(BRAZE_OP_NAME_CASE) }                      \
    return "?";                                                   \
  }
