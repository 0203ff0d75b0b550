/* The step planner's analysis, shared by the backends that capture recorded steps
 * (CUDA, OpenCL): which adjacent ops of a captured run may be launched together.
 *
 * Three patterns, all of the decode step of a transformer layer:
 *   FUSE_MV    [RMS_NORM] LINEAR... [SWIGLU|GEGLU|ADD]: an optional norm (last dim, f32)
 *              whose output is the x of one or more adjacent linears reading exactly the
 *              same x (no bias), then optionally a gated activation of the first two
 *              linears' outputs, or an add of one linear's output and a residual of the
 *              same shape.
 *   FUSE_ROPE  [RMS_NORM...] ROPE... SET_ROWS...: the attention prologue, rotations of q
 *              and k (T = 1), each optionally after a per-head RMS norm (Gemma 3's and
 *              Qwen 3's q/k norms), and the writes of k's rotated rows and of v's rows
 *              into the KV cache.
 *   FUSE_NORM_ADD  RMS_NORM ADD: a post-norm and the residual add that takes its output
 *              (Gemma 3's post-attention and post-FFN norms).
 * A group never drops an op: every op's dst is still written (later ops and the host may
 * read any of them). A group only holds ops whose merging cannot change a result: the
 * outputs of its ops are disjoint from each other and from every input of the group but
 * the ones the group itself produces for a later member (which are then read exactly as
 * written). What the planner leaves out runs op by op. */
#ifndef CT_CORE_FUSE_H
#define CT_CORE_FUSE_H

#include "core/backend.h"

#define FUSE_MAX_LIN 4
#define FUSE_MAX_ROPE 2
#define FUSE_MAX_ROWS 2

typedef enum fuse_kind { FUSE_NONE, FUSE_MV, FUSE_ROPE, FUSE_NORM_ADD } fuse_kind;

/* Op indices are absolute (into the array given to fuse_plan); -1 where absent. */
typedef struct fuse_group {
    fuse_kind kind;
    int first, n; /* ops [first, first + n) */
    /* FUSE_MV, FUSE_NORM_ADD */
    int norm;
    int lin[FUSE_MAX_LIN];
    int n_lin;
    int glu;      /* SWIGLU/GEGLU of lin[0] (src 0) and lin[1] (src 1) */
    int add;      /* ADD of lin[add_lin]'s dst (FUSE_NORM_ADD: the norm's) and a residual (its src add_res) */
    int add_lin, add_res;
    /* FUSE_ROPE */
    int rope[FUSE_MAX_ROPE];
    int n_rope;
    int rope_norm[FUSE_MAX_ROPE]; /* the RMS_NORM whose dst rope r rotates, -1: none */
    int n_norm;                   /* those norms lead the group */
    int rows[FUSE_MAX_ROWS];
    int n_rows;
    int rows_rope[FUSE_MAX_ROWS]; /* per row write: the index in rope[] whose dst it writes (-1: a plain source) */
} fuse_group;

/* What the backend can launch fused (each NULL: never). Called with candidate groups,
 * largest first; a refused one is retried smaller (no epilogue, no norm, fewer linears). */
typedef struct fuse_caps {
    void *ctx;
    bool (*mv_ok)(void *ctx, const ct_op *ops, const fuse_group *g);
    bool (*rope_ok)(void *ctx, const ct_op *ops, const fuse_group *g);
    bool (*norm_add_ok)(void *ctx, const ct_op *ops, const fuse_group *g);
} fuse_caps;

/* Splits ops [0, n) into groups in order: every op belongs to exactly one group, a
 * FUSE_NONE group being a single op to run alone. out has room for n groups; returns
 * how many were made. */
int fuse_plan(const ct_op *ops, int n, const fuse_caps *caps, fuse_group *out);

/* A one-line description of g ("rms_norm+linear x3+swiglu (ops 4..8)") for traces. */
const char *fuse_describe(const ct_op *ops, const fuse_group *g, char *buf, size_t len);

/* Two tensors are the same view: same storage, dtype, offset, shape and strides. */
bool fuse_same_view(const ct_tensor *a, const ct_tensor *b);
/* The bytes two tensors span in one storage intersect. */
bool fuse_overlap(const ct_tensor *a, const ct_tensor *b);

#endif
