/* Element-wise kernels: binary arithmetic, scalar forms, comparisons, where,
 * unary math and activations, gated units. Every kind runs through one N-d
 * job (dst + broadcast sources, dims merged where the layout allows); the
 * contiguous f32 segments go to the SIMD row kernels, everything else to
 * typed scalar loops. Frontends guarantee equal source dtypes. */
#include "backends/cpu/elementwise.h"

/* ---- the N-d job ---- */

static void ew_coalesce(cpu_nd *it)
{
    int nd = 0;
    for (int d = 0; d < it->ndim; d++) {
        if (it->shape[d] == 1) continue;
        bool merge = nd > 0;
        for (int k = 0; merge && k < it->n; k++) merge = it->stride[k][nd - 1] == it->stride[k][d] * it->shape[d];
        if (merge) {
            it->shape[nd - 1] *= it->shape[d];
            for (int k = 0; k < it->n; k++) it->stride[k][nd - 1] = it->stride[k][d];
            continue;
        }
        it->shape[nd] = it->shape[d];
        for (int k = 0; k < it->n; k++) it->stride[k][nd] = it->stride[k][d];
        nd++;
    }
    it->ndim = nd;
}

void ew_job_init(ew_job *j, ct_device *dev, const ct_op *op, ew_seg_fn seg)
{
    const ct_tensor *dst = op->dst;
    j->seg = seg;
    j->op = op;
    j->odt = dst->dtype;
    j->dt = op->src[op->kind == CT_OP_WHERE ? 1 : 0]->dtype;
    j->k = ew_f32_table(cpu_simd_level());
    j->s0 = op->kind == CT_OP_CMP_SCALAR ? op->p.cmp.a : op->p.s.a;
    j->s1 = op->p.s.b;
    cpu_nd_init(&j->it, dst->ndim, dst->shape);
    cpu_nd_add(&j->it, dst, dev);
    for (int i = 0; i < op->n_src; i++) cpu_nd_add(&j->it, op->src[i], dev);
    ew_coalesce(&j->it);
    j->stream = (size_t)shape_numel(j->it.ndim, j->it.shape) * j->it.esize[0] >= EW_STREAM_BYTES;
}

static void ew_range(void *ctx, int64_t b, int64_t e)
{
    const ew_job *j = ctx;
    const cpu_nd *it = &j->it;
    int64_t cols = cpu_nd_cols(it), row = b / cols, col = b % cols;
    int64_t s[CPU_ND_MAX];
    char *p[CPU_ND_MAX];
    for (int k = 0; k < it->n; k++) s[k] = cpu_nd_inner(it, k);
    while (b < e) {
        int64_t n = cols - col < e - b ? cols - col : e - b;
        for (int k = 0; k < it->n; k++) p[k] = cpu_nd_row(it, k, row) + col * s[k] * (int64_t)it->esize[k];
        j->seg(j, p, s, n);
        b += n;
        row++;
        col = 0;
    }
}

void ew_job_run(ew_job *j)
{
    int64_t n = shape_numel(j->it.ndim, j->it.shape);
    if (n <= 0) return;
    if (n <= EW_GRAIN) ew_range(j, 0, n); /* small tensors never touch the pool */
    else cpu_parallel_for(n, EW_GRAIN, ew_range, j);
}

/* ---- typed element access ---- */

static inline void ew_store_f(void *p, ct_dtype t, float v)
{
    switch (t) {
    case CT_F32: *(float *)p = v; break;
    case CT_F16: *(uint16_t *)p = ct_f32_to_f16(v); break;
    case CT_BF16: *(uint16_t *)p = ct_f32_to_bf16(v); break;
    default: cpu_store_f64(p, t, v); break;
    }
}

static inline int64_t ew_load_i(const void *p, ct_dtype t)
{
    switch (t) {
    case CT_I64: return *(const int64_t *)p;
    case CT_I32: return *(const int32_t *)p;
    case CT_I8: return *(const int8_t *)p;
    case CT_BOOL: return *(const uint8_t *)p != 0;
    default: return 0;
    }
}

/* Narrowing keeps the low bits, like torch's integer overflow. */
static inline void ew_store_i(void *p, ct_dtype t, int64_t v)
{
    switch (t) {
    case CT_I64: *(int64_t *)p = v; break;
    case CT_I32: *(int32_t *)p = (int32_t)(uint32_t)(uint64_t)v; break;
    case CT_I8: *(int8_t *)p = (int8_t)(uint8_t)(uint64_t)v; break;
    case CT_BOOL: *(uint8_t *)p = v != 0; break;
    default: break;
    }
}

static bool ew_is_int(ct_dtype t) { return t == CT_I8 || t == CT_I32 || t == CT_I64 || t == CT_BOOL; }
static bool ew_is_f32_class(ct_dtype t) { return t == CT_F32 || t == CT_F16 || t == CT_BF16; }

static ct_op_kind ew_base_kind(ct_op_kind k)
{
    switch (k) {
    case CT_OP_ADD_SCALAR: return CT_OP_ADD;
    case CT_OP_SUB_SCALAR: return CT_OP_SUB;
    case CT_OP_MUL_SCALAR: return CT_OP_MUL;
    case CT_OP_DIV_SCALAR: return CT_OP_DIV;
    case CT_OP_POW_SCALAR: return CT_OP_POW;
    default: return k;
    }
}

/* Wrapping integer arithmetic (unsigned, so overflow is defined). */
static int64_t ew_ipow(int64_t a, int64_t b)
{
    if (b < 0) return a == 1 ? 1 : a == -1 ? (b & 1 ? -1 : 1) : 0;
    uint64_t r = 1, x = (uint64_t)a;
    for (uint64_t e = (uint64_t)b; e; e >>= 1) {
        if (e & 1) r *= x;
        x *= x;
    }
    return (int64_t)r;
}

static int64_t ew_binary_i(ct_op_kind k, int64_t a, int64_t b)
{
    switch (k) {
    case CT_OP_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
    case CT_OP_SUB: return (int64_t)((uint64_t)a - (uint64_t)b);
    case CT_OP_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
    case CT_OP_POW: return ew_ipow(a, b);
    case CT_OP_MAXIMUM: return a > b ? a : b;
    case CT_OP_MINIMUM: return a < b ? a : b;
    default: return 0;
    }
}

/* ---- binary segments: p = {dst, a, b} ---- */

static bool ew_vs_kind(ct_op_kind k) { return k != CT_OP_SWIGLU && k != CT_OP_GEGLU; }

static void seg_binary_f32(const ew_job *j, char *const *p, const int64_t *s, int64_t n)
{
    ct_op_kind k = j->op->kind;
    float *d = (float *)p[0];
    const float *a = (const float *)p[1], *b = (const float *)p[2];
    if (s[0] == 1) {
        if (s[1] == 1 && s[2] == 1) {
            j->k->vv(k, d, a, b, n, j->stream);
            return;
        }
        if (s[1] == 1 && s[2] == 0 && ew_vs_kind(k)) {
            j->k->vs(k, d, a, *b, false, n, j->stream);
            return;
        }
        if (s[1] == 0 && s[2] == 1 && ew_vs_kind(k)) {
            j->k->vs(k, d, b, *a, true, n, j->stream);
            return;
        }
    }
    bool gated = !ew_vs_kind(k);
    for (int64_t i = 0; i < n; i++) {
        float x = a[i * s[1]], y = b[i * s[2]];
        d[i * s[0]] = gated ? ew_gate_f(k, x) * y : ew_binary_f(k, x, y);
    }
}

static void seg_binary_generic(const ew_job *j, char *const *p, const int64_t *s, int64_t n)
{
    ct_op_kind k = j->op->kind;
    ct_dtype dt = j->dt, odt = j->odt;
    size_t ea = j->it.esize[1], eb = j->it.esize[2], ed = j->it.esize[0];
    bool gated = !ew_vs_kind(k);
    for (int64_t i = 0; i < n; i++) {
        const char *pa = p[1] + i * s[1] * (int64_t)ea, *pb = p[2] + i * s[2] * (int64_t)eb;
        char *pd = p[0] + i * s[0] * (int64_t)ed;
        if (ew_is_int(dt)) {
            ew_store_i(pd, odt, ew_binary_i(k, ew_load_i(pa, dt), ew_load_i(pb, dt)));
        } else if (dt == CT_F64) {
            double x = *(const double *)pa, y = *(const double *)pb;
            *(double *)pd = gated ? ew_gate_d(k, x) * y : ew_binary_d(k, x, y);
        } else {
            float x = cpu_load_f32(pa, dt), y = cpu_load_f32(pb, dt);
            ew_store_f(pd, odt, gated ? ew_gate_f(k, x) * y : ew_binary_f(k, x, y));
        }
    }
}

/* ---- scalar forms: p = {dst, a}; the scalar is j->s0 ---- */

static void seg_scalar(const ew_job *j, char *const *p, const int64_t *s, int64_t n)
{
    ct_op_kind k = ew_base_kind(j->op->kind);
    ct_dtype dt = j->dt, odt = j->odt;
    size_t ea = j->it.esize[1], ed = j->it.esize[0];
    if (dt == CT_F32 && odt == CT_F32 && s[0] == 1 && s[1] == 1) {
        j->k->vs(k, (float *)p[0], (const float *)p[1], (float)j->s0, false, n, j->stream);
        return;
    }
    int64_t si = (int64_t)j->s0; /* integral for integer sources (frontend) */
    float sf = (float)j->s0;
    for (int64_t i = 0; i < n; i++) {
        const char *pa = p[1] + i * s[1] * (int64_t)ea;
        char *pd = p[0] + i * s[0] * (int64_t)ed;
        if (ew_is_int(dt)) ew_store_i(pd, odt, ew_binary_i(k, ew_load_i(pa, dt), si));
        else if (dt == CT_F64) *(double *)pd = ew_binary_d(k, *(const double *)pa, j->s0);
        else ew_store_f(pd, odt, ew_binary_f(k, cpu_load_f32(pa, dt), sf));
    }
}

/* ---- comparisons: dst bool; CMP p = {dst, a, b}, CMP_SCALAR p = {dst, a} ---- */

static inline bool ew_cmp_d(ct_cmp c, double a, double b)
{
    switch (c) {
    case CT_CMP_EQ: return a == b;
    case CT_CMP_NE: return a != b;
    case CT_CMP_LT: return a < b;
    case CT_CMP_LE: return a <= b;
    case CT_CMP_GT: return a > b;
    case CT_CMP_GE: return a >= b;
    }
    return false;
}

static inline bool ew_cmp_i(ct_cmp c, int64_t a, int64_t b)
{
    switch (c) {
    case CT_CMP_EQ: return a == b;
    case CT_CMP_NE: return a != b;
    case CT_CMP_LT: return a < b;
    case CT_CMP_LE: return a <= b;
    case CT_CMP_GT: return a > b;
    case CT_CMP_GE: return a >= b;
    }
    return false;
}

/* The scalar as the source dtype sees it: rounded to that float type, so
 * x == 0.1 holds for the f32 element nearest 0.1 (as in torch). */
static double ew_cmp_scalar_value(ct_dtype dt, double s)
{
    switch (dt) {
    case CT_F32: return (float)s;
    case CT_F16: return ct_f16_to_f32(ct_f32_to_f16((float)s));
    case CT_BF16: return ct_bf16_to_f32(ct_f32_to_bf16((float)s));
    default: return s;
    }
}

static bool ew_int_exact(double s) { return s == floor(s) && s >= -9223372036854775808.0 && s < 9223372036854775808.0; }

static void seg_cmp(const ew_job *j, char *const *p, const int64_t *s, int64_t n)
{
    ct_cmp c = j->op->p.cmp.cmp;
    ct_dtype dt = j->dt;
    bool scalar = j->op->kind == CT_OP_CMP_SCALAR;
    size_t ea = j->it.esize[1], eb = scalar ? 0 : j->it.esize[2];
    double sv = ew_cmp_scalar_value(dt, j->s0);
    bool int_path = ew_is_int(dt) && (!scalar || ew_int_exact(sv));
    int64_t si = int_path && scalar ? (int64_t)sv : 0;
    uint8_t *d = (uint8_t *)p[0];
    for (int64_t i = 0; i < n; i++) {
        const char *pa = p[1] + i * s[1] * (int64_t)ea, *pb = scalar ? NULL : p[2] + i * s[2] * (int64_t)eb;
        bool r;
        if (dt == CT_C64) {
            const float *za = (const float *)pa;
            bool eq = pb ? za[0] == ((const float *)pb)[0] && za[1] == ((const float *)pb)[1] : za[0] == sv && za[1] == 0.0f;
            r = c == CT_CMP_EQ ? eq : !eq;
        } else if (int_path) {
            r = ew_cmp_i(c, ew_load_i(pa, dt), pb ? ew_load_i(pb, dt) : si);
        } else {
            r = ew_cmp_d(c, cpu_load_f64(pa, dt), pb ? cpu_load_f64(pb, dt) : sv);
        }
        d[i * s[0]] = r;
    }
}

/* ---- where: p = {dst, cond, a, b}; a, b and dst share one dtype ---- */

static void seg_where(const ew_job *j, char *const *p, const int64_t *s, int64_t n)
{
    size_t es = j->it.esize[0];
    const uint8_t *c = (const uint8_t *)p[1];
    for (int64_t i = 0; i < n; i++) {
        const char *src = c[i * s[1]] ? p[2] + i * s[2] * (int64_t)es : p[3] + i * s[3] * (int64_t)es;
        char *dst = p[0] + i * s[0] * (int64_t)es;
        switch (es) {
        case 1: *dst = *src; break;
        case 2: memcpy(dst, src, 2); break;
        case 4: memcpy(dst, src, 4); break;
        case 8: memcpy(dst, src, 8); break;
        default: memcpy(dst, src, es); break;
        }
    }
}

/* ---- flat f32 path: contiguous operands of dst's size or single elements.
 * No N-d setup, so small eager ops cost little, and large contiguous ones
 * split evenly over the pool. ---- */

typedef enum flat_mode { FLAT_VV, FLAT_VS, FLAT_SV, FLAT_UNARY } flat_mode;

typedef struct ew_flat {
    const ew_f32_kernels *k;
    ct_op_kind kind;
    flat_mode mode;
    float *d;
    const float *a, *b;
    float p0, p1;
    bool stream;
} ew_flat;

static void ew_flat_range(void *ctx, int64_t b, int64_t e)
{
    const ew_flat *f = ctx;
    float *d = f->d + b;
    int64_t n = e - b;
    switch (f->mode) {
    case FLAT_VV: f->k->vv(f->kind, d, f->a + b, f->b + b, n, f->stream); break;
    case FLAT_VS: f->k->vs(f->kind, d, f->a + b, f->p0, false, n, f->stream); break;
    case FLAT_SV: f->k->vs(f->kind, d, f->b + b, f->p0, true, n, f->stream); break;
    case FLAT_UNARY: f->k->unary(f->kind, d, f->a + b, n, f->p0, f->p1, f->stream); break;
    }
}

static bool ew_flat_operand(const ct_tensor *t, int64_t n)
{
    if (t->dtype != CT_F32 || !tensor_is_contiguous(t)) return false;
    int64_t m = shape_numel(t->ndim, t->shape);
    return m == n || m == 1;
}

/* Runs op on the flat path when its operands allow; false leaves it to the N-d job. */
static bool ew_flat_try(ct_device *dev, const ct_op *op)
{
    const ct_tensor *dst = op->dst;
    if (dst->dtype != CT_F32 || !tensor_is_contiguous(dst)) return false;
    int64_t n = shape_numel(dst->ndim, dst->shape);
    for (int i = 0; i < op->n_src; i++)
        if (!ew_flat_operand(op->src[i], n)) return false;
    ew_flat f = {.kind = ew_base_kind(op->kind), .d = op_data(dst, dev), .a = op_data(op->src[0], dev)};
    bool a1 = n > 1 && shape_numel(op->src[0]->ndim, op->src[0]->shape) == 1;
    if (op->n_src == 2) {
        f.b = op_data(op->src[1], dev);
        bool b1 = n > 1 && shape_numel(op->src[1]->ndim, op->src[1]->shape) == 1;
        bool gated = op->kind == CT_OP_SWIGLU || op->kind == CT_OP_GEGLU;
        if (a1 && b1) return false;
        if ((a1 || b1) && gated) return false;
        f.mode = a1 ? FLAT_SV : b1 ? FLAT_VS : FLAT_VV;
        f.p0 = a1 ? *f.a : b1 ? *f.b : 0.0f;
    } else if (a1) {
        return false;
    } else if (f.kind != op->kind) { /* *_SCALAR */
        f.mode = FLAT_VS;
        f.p0 = (float)op->p.s.a;
    } else {
        f.mode = FLAT_UNARY;
        f.p0 = (float)op->p.s.a;
        f.p1 = (float)op->p.s.b;
    }
    /* tiny tensors: plain loops beat staging a partial vector */
    f.k = n < 16 ? ew_f32_table(CPU_SIMD_PORTABLE) : ew_f32_table(cpu_simd_level());
    f.stream = (size_t)n * sizeof(float) >= EW_STREAM_BYTES;
    if (n <= EW_GRAIN) ew_flat_range(&f, 0, n);
    else cpu_parallel_for(n, EW_GRAIN, ew_flat_range, &f);
    return true;
}

ct_status cpu_run_binary(ct_device *dev, const ct_op *op)
{
    if (op->src[0]->dtype == CT_C64 && op->kind != CT_OP_CMP && op->kind != CT_OP_CMP_SCALAR && op->kind != CT_OP_WHERE)
        return cpu_c64_binary(dev, op);
    ew_seg_fn seg;
    switch (op->kind) {
    case CT_OP_ADD: case CT_OP_SUB: case CT_OP_MUL: case CT_OP_DIV: case CT_OP_POW: case CT_OP_MAXIMUM:
    case CT_OP_MINIMUM:
        if (ew_flat_try(dev, op)) return CT_OK;
        seg = op->src[0]->dtype == CT_F32 && op->dst->dtype == CT_F32 ? seg_binary_f32 : seg_binary_generic;
        break;
    case CT_OP_ADD_SCALAR: case CT_OP_SUB_SCALAR: case CT_OP_MUL_SCALAR: case CT_OP_DIV_SCALAR:
    case CT_OP_POW_SCALAR:
        if (ew_flat_try(dev, op)) return CT_OK;
        seg = seg_scalar;
        break;
    case CT_OP_CMP: case CT_OP_CMP_SCALAR: seg = seg_cmp; break;
    case CT_OP_WHERE: seg = seg_where; break;
    default: return core_err(CT_ERR_UNSUPPORTED, "cpu: %s is not a binary kernel", op_kind_name(op->kind));
    }
    ew_job j;
    ew_job_init(&j, dev, op, seg);
    ew_job_run(&j);
    return CT_OK;
}

/* ---- unary segments: p = {dst, a} ---- */

static void seg_unary_f32(const ew_job *j, char *const *p, const int64_t *s, int64_t n)
{
    ct_op_kind k = j->op->kind;
    float p0 = (float)j->s0, p1 = (float)j->s1;
    float *d = (float *)p[0];
    const float *a = (const float *)p[1];
    if (s[0] == 1 && s[1] == 1) {
        j->k->unary(k, d, a, n, p0, p1, j->stream);
        return;
    }
    for (int64_t i = 0; i < n; i++) d[i * s[0]] = ew_unary_f(k, a[i * s[1]], p0, p1);
}

/* Clamp bounds for integer elements: the frontend passes integral or infinite bounds. */
static int64_t ew_bound_i(double v)
{
    if (v <= -9223372036854775808.0) return INT64_MIN;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    return (int64_t)v;
}

static int64_t ew_unary_i(ct_op_kind k, int64_t x, int64_t lo, int64_t hi)
{
    switch (k) {
    case CT_OP_NEG: return (int64_t)(0 - (uint64_t)x);
    case CT_OP_ABS: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case CT_OP_RELU: return x > 0 ? x : 0;
    case CT_OP_CLAMP: {
        int64_t r = x < lo ? lo : x;
        return r > hi ? hi : r;
    }
    default: return 0;
    }
}

static void seg_unary_generic(const ew_job *j, char *const *p, const int64_t *s, int64_t n)
{
    ct_op_kind k = j->op->kind;
    ct_dtype dt = j->dt, odt = j->odt;
    size_t ea = j->it.esize[1], ed = j->it.esize[0];
    int64_t lo = ew_bound_i(j->s0), hi = ew_bound_i(j->s1);
    for (int64_t i = 0; i < n; i++) {
        const char *pa = p[1] + i * s[1] * (int64_t)ea;
        char *pd = p[0] + i * s[0] * (int64_t)ed;
        if (ew_is_int(dt)) ew_store_i(pd, odt, ew_unary_i(k, ew_load_i(pa, dt), lo, hi));
        else if (dt == CT_F64) *(double *)pd = ew_unary_d(k, *(const double *)pa, j->s0, j->s1);
        else ew_store_f(pd, odt, ew_unary_f(k, cpu_load_f32(pa, dt), (float)j->s0, (float)j->s1));
    }
}

ct_status cpu_run_unary(ct_device *dev, const ct_op *op)
{
    ct_dtype dt = op->src[0]->dtype;
    if (dt == CT_C64) return cpu_c64_unary(dev, op);
    ew_seg_fn seg;
    switch (op->kind) {
    case CT_OP_SWIGLU: case CT_OP_GEGLU:
        if (ew_flat_try(dev, op)) return CT_OK;
        seg = dt == CT_F32 && op->dst->dtype == CT_F32 ? seg_binary_f32 : seg_binary_generic;
        break;
    case CT_OP_NEG: case CT_OP_ABS: case CT_OP_EXP: case CT_OP_LOG: case CT_OP_SQRT: case CT_OP_RSQRT:
    case CT_OP_SIN: case CT_OP_COS: case CT_OP_CLAMP: case CT_OP_RELU: case CT_OP_GELU: case CT_OP_SILU:
    case CT_OP_SIGMOID: case CT_OP_TANH:
        if (ew_is_int(dt) && op->kind != CT_OP_NEG && op->kind != CT_OP_ABS && op->kind != CT_OP_RELU &&
            op->kind != CT_OP_CLAMP)
            return core_err(CT_ERR_DTYPE, "cpu: %s on %s needs a float source", op_kind_name(op->kind), ct_dtype_name(dt));
        if (ew_flat_try(dev, op)) return CT_OK;
        seg = dt == CT_F32 && op->dst->dtype == CT_F32 ? seg_unary_f32 : seg_unary_generic;
        break;
    default: return core_err(CT_ERR_UNSUPPORTED, "cpu: %s is not a unary kernel", op_kind_name(op->kind));
    }
    if (!ew_is_f32_class(dt) && dt != CT_F64 && !ew_is_int(dt))
        return core_err(CT_ERR_DTYPE, "cpu: %s has no %s kernel", op_kind_name(op->kind), ct_dtype_name(dt));
    ew_job j;
    ew_job_init(&j, dev, op, seg);
    ew_job_run(&j);
    return CT_OK;
}
