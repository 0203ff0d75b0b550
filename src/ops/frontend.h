/* Helpers shared by the op frontends (src/ops): argument checks, output
 * creation, dtype promotion, submission to the executor. */
#ifndef CT_OPS_FRONTEND_H
#define CT_OPS_FRONTEND_H

#include "core/backend.h"
#include "exec/exec.h"

#define OPS_CHECK(opname, t)                                                       \
    do {                                                                           \
        ct_status s_ = tensor_check(opname, #t, t);                                \
        if (s_ != CT_OK) return s_;                                                \
    } while (0)
#define OPS_CHECK_OUT(opname, out)                                                 \
    do {                                                                           \
        if (!(out)) return core_err(CT_ERR_INVALID_ARG, "%s: out is NULL", opname); \
    } while (0)

/* ---- `out` forms (ct_*_out): the op writes its result into a caller's tensor ----
 * ops_out_begin checks out against the inputs (aliasing), then the ordinary frontend
 * runs: its first submitted op of `kind` writes straight into out when out is
 * contiguous and has the result's shape (the op's dst becomes a view of out, so it runs
 * where routing says and out's storage is written there); otherwise the result is made
 * fresh and copied into out (a strided out, or a frontend that reshapes its op's result).
 * ops_out_end finishes either way: a result whose dtype or shape is not out's is an
 * error naming the op, never a resize. */
typedef struct ops_out_req {
    const char *name;
    ct_op_kind kind;
    ct_tensor *out;
    bool taken;   /* an op of `kind` was submitted (only the first one is considered) */
    bool inplace; /* it writes into out directly */
    struct ops_out_req *prev;
} ops_out_req;
/* elementwise: out may be exactly an input's view (same storage, offset, shape, strides, dtype). */
ct_status ops_out_begin(ops_out_req *r, const char *name, ct_op_kind kind, ct_tensor *out,
                        const ct_tensor *const *ins, int n_in, bool elementwise);
/* status is the frontend's, res its result (freed here). */
ct_status ops_out_end(ops_out_req *r, ct_status status, ct_tensor *res);

/* A fresh output shell for op->dst. */
ct_status ops_new_dst(int ndim, const int64_t *shape, ct_dtype dtype, ct_op *op);
/* Runs op; on success *out = op->dst, on failure frees op->dst. */
ct_status ops_submit(ct_op *op, ct_tensor **out);
/* PyTorch-like result dtype: bool < i8 < i32 < i64 < f16|bf16 (together: f32) < f32 < f64 < c64. */
ct_dtype ops_promote(ct_dtype a, ct_dtype b);
/* *use = t if it already has dtype dt, else a cast copy stored in *tmp (free it after). */
ct_status ops_as_dtype(const ct_tensor *t, ct_dtype dt, ct_tensor **tmp, const ct_tensor **use);
/* Rejects quantized inputs for ops that need plain element access. */
ct_status ops_require_plain(const char *opname, const ct_tensor *t);

#endif
