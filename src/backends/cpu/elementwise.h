/* Element-wise kernels: the N-d job runner and the f32 row kernels shared by
 * elementwise.c, elementwise_simd.c, softmax.c and complex.c. Private to the
 * CPU backend. */
#ifndef CT_CPU_ELEMENTWISE_H
#define CT_CPU_ELEMENTWISE_H

#include <math.h>

#include "backends/cpu/cpu.h"

/* Elements per thread-pool chunk: below this a job runs inline on the caller. */
#define EW_GRAIN 32768
/* Outputs at least this large are written with streaming stores: they cannot
 * stay in cache, and skipping the read-for-ownership saves a third of the traffic. */
#define EW_STREAM_BYTES ((size_t)16 << 20)

/* ---- f32 row kernels, one table per SIMD level ---- */
typedef struct ew_f32_kernels {
    /* d = a OP b for ADD SUB MUL DIV MAXIMUM MINIMUM; d = act(a) * b for SWIGLU GEGLU */
    void (*vv)(ct_op_kind k, float *d, const float *a, const float *b, int64_t n, bool stream);
    /* d = a OP s, or s OP a when rev (ADD SUB MUL DIV MAXIMUM MINIMUM) */
    void (*vs)(ct_op_kind k, float *d, const float *a, float s, bool rev, int64_t n, bool stream);
    /* d = f(a) for every unary kind of cpu_run_unary; p0/p1: CLAMP bounds, GELU p0 != 0 = tanh form */
    void (*unary)(ct_op_kind k, float *d, const float *a, int64_t n, float p0, float p1, bool stream);
    float (*max)(const float *a, int64_t n); /* -inf for n == 0; may skip NaNs (softmax meets them in exp) */
    /* d[i] = exp(a[i] - m) unless d is NULL; returns the sum of those values. m must be
     * the row max (vector forms flush results below FLT_MIN to 0) */
    double (*exp_sum)(float *d, const float *a, float m, int64_t n);
} ew_f32_kernels;

/* The table for `level` (a level the CPU lacks falls back to a lower one). */
const ew_f32_kernels *ew_f32_table(cpu_simd level);

/* ---- scalar reference forms (portable path, strided and f16/bf16 elements) ---- */
#define EW_SQRT_2_OVER_PI 0.7978845608028654
#define EW_GELU_CUBIC 0.044715

static inline float ew_max_f(float a, float b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
static inline float ew_min_f(float a, float b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }
static inline double ew_max_d(double a, double b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
static inline double ew_min_d(double a, double b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }

static inline float ew_binary_f(ct_op_kind k, float a, float b)
{
    switch (k) {
    case CT_OP_ADD: case CT_OP_ADD_SCALAR: return a + b;
    case CT_OP_SUB: case CT_OP_SUB_SCALAR: return a - b;
    case CT_OP_MUL: case CT_OP_MUL_SCALAR: return a * b;
    case CT_OP_DIV: case CT_OP_DIV_SCALAR: return a / b;
    case CT_OP_POW: case CT_OP_POW_SCALAR: return powf(a, b);
    case CT_OP_MAXIMUM: return ew_max_f(a, b);
    case CT_OP_MINIMUM: return ew_min_f(a, b);
    default: return 0.0f;
    }
}

static inline double ew_binary_d(ct_op_kind k, double a, double b)
{
    switch (k) {
    case CT_OP_ADD: case CT_OP_ADD_SCALAR: return a + b;
    case CT_OP_SUB: case CT_OP_SUB_SCALAR: return a - b;
    case CT_OP_MUL: case CT_OP_MUL_SCALAR: return a * b;
    case CT_OP_DIV: case CT_OP_DIV_SCALAR: return a / b;
    case CT_OP_POW: case CT_OP_POW_SCALAR: return pow(a, b);
    case CT_OP_MAXIMUM: return ew_max_d(a, b);
    case CT_OP_MINIMUM: return ew_min_d(a, b);
    default: return 0.0;
    }
}

/* sigmoid through e^-|x| (never overflows), silu and gelu_tanh as x * sigmoid(.)
 * (no 1 + tanh cancellation), gelu_erf through erfc in double (a rounded f32
 * argument would cost ~2 z^2 ulp): far negative inputs keep their relative accuracy. */
static inline float ew_sigmoid_f(float x)
{
    float e = expf(-fabsf(x)), s = 1.0f / (1.0f + e);
    return x < 0.0f ? e * s : s;
}
static inline double ew_sigmoid_d(double x)
{
    double e = exp(-fabs(x)), s = 1.0 / (1.0 + e);
    return x < 0.0 ? e * s : s;
}

static inline float ew_unary_f(ct_op_kind k, float x, float p0, float p1)
{
    switch (k) {
    case CT_OP_NEG: return -x;
    case CT_OP_ABS: return fabsf(x);
    case CT_OP_EXP: return expf(x);
    case CT_OP_LOG: return logf(x);
    case CT_OP_SQRT: return sqrtf(x);
    case CT_OP_RSQRT: return 1.0f / sqrtf(x);
    case CT_OP_SIN: return sinf(x);
    case CT_OP_COS: return cosf(x);
    case CT_OP_CLAMP: {
        float r = x < p0 ? p0 : x;
        return r > p1 ? p1 : r;
    }
    case CT_OP_RELU: return x > 0.0f ? x : (x != x ? x : 0.0f);
    case CT_OP_SIGMOID: return ew_sigmoid_f(x);
    case CT_OP_SILU: return x * ew_sigmoid_f(x);
    case CT_OP_TANH: return tanhf(x);
    case CT_OP_GELU:
        if (p0 != 0.0f) return x * ew_sigmoid_f((float)(2.0 * EW_SQRT_2_OVER_PI) * (x + (float)EW_GELU_CUBIC * x * x * x));
        return (float)(0.5 * x * erfc(-x * M_SQRT1_2));
    default: return 0.0f;
    }
}

static inline double ew_unary_d(ct_op_kind k, double x, double p0, double p1)
{
    switch (k) {
    case CT_OP_NEG: return -x;
    case CT_OP_ABS: return fabs(x);
    case CT_OP_EXP: return exp(x);
    case CT_OP_LOG: return log(x);
    case CT_OP_SQRT: return sqrt(x);
    case CT_OP_RSQRT: return 1.0 / sqrt(x);
    case CT_OP_SIN: return sin(x);
    case CT_OP_COS: return cos(x);
    case CT_OP_CLAMP: {
        double r = x < p0 ? p0 : x;
        return r > p1 ? p1 : r;
    }
    case CT_OP_RELU: return x > 0.0 ? x : (x != x ? x : 0.0);
    case CT_OP_SIGMOID: return ew_sigmoid_d(x);
    case CT_OP_SILU: return x * ew_sigmoid_d(x);
    case CT_OP_TANH: return tanh(x);
    case CT_OP_GELU:
        if (p0 != 0.0) return x * ew_sigmoid_d(2.0 * EW_SQRT_2_OVER_PI * (x + EW_GELU_CUBIC * x * x * x));
        return 0.5 * x * erfc(-x * M_SQRT1_2);
    default: return 0.0;
    }
}

/* SWIGLU / GEGLU activation of the gate. */
static inline float ew_gate_f(ct_op_kind k, float g)
{
    return ew_unary_f(k == CT_OP_SWIGLU ? CT_OP_SILU : CT_OP_GELU, g, 1.0f, 0.0f);
}
static inline double ew_gate_d(ct_op_kind k, double g)
{
    return ew_unary_d(k == CT_OP_SWIGLU ? CT_OP_SILU : CT_OP_GELU, g, 1.0, 0.0);
}

/* ---- N-d jobs: operand 0 is dst, then the sources, broadcast to dst's shape ---- */
typedef struct ew_job ew_job;
/* n elements of a row segment; p[k] first element of operand k, s[k] its stride in elements. */
typedef void (*ew_seg_fn)(const ew_job *j, char *const *p, const int64_t *s, int64_t n);

struct ew_job {
    cpu_nd it;
    ew_seg_fn seg;
    const ct_op *op;
    ct_dtype dt;                /* dtype of the sources */
    ct_dtype odt;               /* dtype of dst */
    const ew_f32_kernels *k;    /* row kernels at the current SIMD level */
    bool stream;                /* output large enough for streaming stores */
    double s0, s1;              /* op scalars */
};

/* Sets up it with dst then op->src[0..n_src), merges dims that are contiguous
 * across every operand and drops size-1 dims. */
void ew_job_init(ew_job *j, ct_device *dev, const ct_op *op, ew_seg_fn seg);
/* Runs seg over every element, on the thread pool when the job is large. */
void ew_job_run(ew_job *j);

/* complex.c: c64 element-wise kinds reached through cpu_run_binary / cpu_run_unary. */
ct_status cpu_c64_binary(ct_device *dev, const ct_op *op);
ct_status cpu_c64_unary(ct_device *dev, const ct_op *op);

#endif
