/* ctorch-bench-exec: what the executor costs per op, eager against a replayed
 * recorded step (ct_step_*), on the CPU or (-d) on another device.
 *
 * Workloads (one "step" each):
 *   chain   N ops on 1-element f32 tensors, alternately x+b and x*b, each result the
 *           next op's input (the kernels do almost nothing: executor cost shows bare)
 *   decode  one decode token of an LLM (llm_forward_step with the token id, position,
 *           KV write slot and attended length in tensors, as src/llm/decode_step.c
 *           does), on each model given with -m (default: the refdata mini models)
 *
 * Each workload is measured three ways, taking turns step by step within every round
 * so a noisy neighbour hits all three alike:
 *   eager    the step's ops called one by one through the public API (routing,
 *            allocation, residency bookkeeping), intermediates freed as they go
 *   replay   ct_step_run of the step recorded once from the same code
 *   kernels  the same op list called directly through the CPU backend's run, in a
 *            bare loop: no executor at all. This is the kernel time.
 * Executor time per op = (eager or replay time - kernel time) / ops per step, the
 * median of the per-round differences. "Kernel time" is everything behind the
 * backend's run entry point (its thread pool hand-off and per-call setup included),
 * so the figure is exactly what the executor adds on top of the backend.
 *
 * How the op list is obtained without touching the executor: the CPU device's
 * function table is swapped, for one replay, for a copy whose run records each op
 * pointer before calling the real run. The pointers point into the step's own op
 * records, stable while the step lives, so the kernel loop runs exactly the ops,
 * operands and arena buffers of the replay. The same wrapper, in counting mode, checks
 * that an eager step issues as many backend runs as the recording holds. Timing is
 * never done per op (no clock reads inside the timed loops), so nothing is charged
 * twice; the alternative, CTORCH_STATS=1 per-op times summed and subtracted from an
 * untimed replay, would charge the clock reads around each op to the kernels.
 *
 * On another device (-d cuda): the tensors and the model's weights are placed there, the
 * chain is DEVICE,cpu, and every timed step ends with a device sync, so each mode's time
 * is the device's too (the sync's own cost is the same in every mode and cancels in the
 * differences). The replay is then the backend's captured step (a CUDA graph), and
 * "kernels" is the backend's run called in a loop: its launches without the executor.
 * Output: a markdown table on stdout, progress on stderr. Timings are never asserted.
 * --profile eager|replay|kernels SECONDS runs only that mode, on each workload, for that
 * long and prints no table: a target for `perf record`.
 * Usage: ctorch-bench-exec [-d DEVICE] [-m MODEL]... [--chain N] [-r ROUNDS] [-t THREADS]
 *                          [--pos P] [--quick] [--no-models] [--profile MODE SECONDS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/backend.h"
#include "ctorch/ctorch.h"
#include "exec/exec.h"
#include "llm/generate.h"

#define MAX_ROUNDS 64
#define MAX_MODELS 8
#define MAX_OPS 100000

static void die(const char *what)
{
    fprintf(stderr, "ctorch-bench-exec: %s failed: %s\n", what, ct_last_error());
    exit(1);
}
#define TRY(expr)                        \
    do {                                 \
        if ((expr) != CT_OK) die(#expr); \
    } while (0)

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of v[0..n) (0.5: the median), linear between order statistics. */
static double quantile(const double *v, int n, double q)
{
    double s[MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof *v);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double x = q * (n - 1);
    int i = (int)x;
    return i + 1 < n ? s[i] + (x - i) * (s[i + 1] - s[i]) : s[n - 1];
}

static double median(const double *v, int n) { return quantile(v, n, 0.5); }

/* ---- the measured device's run, interposed ---- */

static ct_device *g_cpu; /* the measured device (the CPU unless -d) */
static const char *g_dev_name = "cpu";
static bool g_async;     /* not the CPU: a step ends with a device sync */
static const ct_backend_ops *g_real;
static ct_backend_ops g_wrapped;
static const ct_op **g_ops; /* captured op pointers */
static int g_n_ops, g_n_runs;
static bool g_capture;

static ct_status wrapped_run(ct_device *dev, const ct_op *op)
{
    if (g_capture && g_n_ops < MAX_OPS) g_ops[g_n_ops++] = op;
    g_n_runs++;
    return g_real->run(dev, op);
}

static void interpose(bool capture)
{
    g_capture = capture;
    g_n_runs = 0;
    if (capture) g_n_ops = 0;
    g_cpu->ops = &g_wrapped;
}

static void restore(void) { g_cpu->ops = g_real; }

/* ---- workloads ---- */

typedef struct workload {
    char name[96];
    void (*eager)(void *ctx); /* one step through the public API, results freed */
    void *ctx;
    ct_step *step;
    int n_ops;       /* in the recording */
    int eager_runs;  /* backend runs an eager step issued */
} workload;

typedef struct chain_ctx {
    ct_tensor *a, *b;
    int n;
} chain_ctx;

static void chain_eager(void *vctx)
{
    chain_ctx *c = vctx;
    ct_tensor *x = c->a;
    for (int i = 0; i < c->n; i++) {
        ct_tensor *y = NULL;
        ct_status st = i % 2 ? ct_mul(x, c->b, &y) : ct_add(x, c->b, &y);
        if (st != CT_OK) die("chain op");
        if (x != c->a) ct_tensor_free(x);
        x = y;
    }
    if (x != c->a) ct_tensor_free(x);
}

typedef struct decode_ctx {
    llm_model *m;
    llm_session s;
    ct_tensor *ids, *pos, *slot, *len; /* the step's parameters */
    llm_step_inputs in;
    ct_tensor *logits; /* the recorded step's output */
} decode_ctx;

static void decode_eager(void *vctx)
{
    decode_ctx *d = vctx;
    ct_tensor *lg = NULL;
    if (llm_forward_step(d->m, &d->s.kv, &d->in, &lg) != CT_OK) die("llm_forward_step");
    ct_tensor_free(lg);
}

static void set_i32(ct_tensor *t, const int32_t *v, int n)
{
    void *p;
    TRY(ct_tensor_data_mut(t, &p));
    memcpy(p, v, (size_t)n * sizeof *v);
}

/* A session with a pos-token prompt in its cache, and the step's parameter tensors at
 * position pos (held fixed, so every step does the same work: attention over pos + 1
 * cached rows). */
static decode_ctx *decode_open(const char *path, int pos)
{
    decode_ctx *d = calloc(1, sizeof *d);
    if (!d) die("calloc");
    TRY(llm_model_load(path, NULL, NULL, &d->m));
    if (g_async) TRY(llm_model_place(d->m, g_dev_name, d->m->hp.n_layer + 1, NULL, NULL, NULL));
    int n_ctx = pos + 64;
    TRY(llm_session_init(&d->s, d->m, n_ctx, CT_F16, NULL));
    /* the cache rows the step attends to hold a real prompt's keys and values, not
     * uninitialised memory (whose NaNs could take other paths than real data) */
    if (pos > 0) {
        int32_t *prompt = malloc((size_t)pos * sizeof *prompt);
        if (!prompt) die("malloc");
        int V = d->m->hp.n_vocab, lo = V > 1000 ? 300 : 0;
        for (int i = 0; i < pos; i++) prompt[i] = lo + (int32_t)((i * 7919u) % (unsigned)(V - lo));
        TRY(llm_session_eval(&d->s, prompt, pos));
        free(prompt);
    }
    int64_t one = 1, hkv = d->m->hp.n_head_kv;
    TRY(ct_zeros(1, &one, CT_I32, &d->ids));
    TRY(ct_zeros(1, &one, CT_I32, &d->pos));
    TRY(ct_zeros(1, &hkv, CT_I32, &d->slot));
    TRY(ct_zeros(1, &one, CT_I32, &d->len));
    d->in = (llm_step_inputs){d->ids, d->pos, d->slot, d->len};
    int32_t tok = d->m->hp.n_vocab > 400 ? 300 : 1, len = pos + 1, *slot = calloc((size_t)hkv, sizeof *slot);
    if (!slot) die("calloc");
    for (int h = 0; h < hkv; h++) slot[h] = h * n_ctx + pos;
    set_i32(d->ids, &tok, 1);
    set_i32(d->pos, &pos, 1);
    set_i32(d->slot, slot, (int)hkv);
    set_i32(d->len, &len, 1);
    free(slot);
    return d;
}

static void decode_close(decode_ctx *d)
{
    ct_tensor_free(d->logits);
    ct_tensor_free(d->ids);
    ct_tensor_free(d->pos);
    ct_tensor_free(d->slot);
    ct_tensor_free(d->len);
    llm_session_free(&d->s);
    llm_model_free(d->m);
    free(d);
}

/* Records the step; for decode the step's logits stay held (an output of the step). */
static void record(workload *w, ct_tensor **keep)
{
    TRY(ct_step_begin());
    if (keep) {
        decode_ctx *d = w->ctx;
        if (llm_forward_step(d->m, &d->s.kv, &d->in, keep) != CT_OK) die("llm_forward_step (recording)");
    } else {
        w->eager(w->ctx);
    }
    TRY(ct_step_end(&w->step));
    ct_step_info info;
    TRY(ct_step_get_info(w->step, &info));
    w->n_ops = info.n_ops;
    interpose(true);
    ct_status st = ct_step_run(w->step);
    restore();
    if (st != CT_OK) die("ct_step_run (capture)");
    TRY(ct_step_get_info(w->step, &info));
    if (!g_async && !info.fast) {
        fprintf(stderr, "ctorch-bench-exec: %s: the replay did not take the CPU's plain loop\n", w->name);
        exit(1);
    }
    if (g_async && g_n_ops == 0) {
        /* the device replayed its captured graph, never its run entry: no op list for a
         * bare kernel loop, so "kernels" is the device sync alone and the executor columns
         * read as the whole cost per op (launches included) */
        restore();
        interpose(false);
        w->eager(w->ctx);
        restore();
        w->eager_runs = g_n_runs;
        return;
    }
    if (g_n_ops != w->n_ops) {
        fprintf(stderr, "ctorch-bench-exec: %s: captured %d backend runs, the step holds %d ops\n", w->name, g_n_ops,
                w->n_ops);
        exit(1);
    }
    interpose(false);
    w->eager(w->ctx);
    restore();
    w->eager_runs = g_n_runs;
}

/* ---- timing ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef enum { M_EAGER, M_REPLAY, M_KERNELS, M_COUNT } mode;

static const ct_op **g_list; /* the workload's captured ops, for the kernel loop */
static int g_list_n;

static void run_mode(workload *w, mode m)
{
    switch (m) {
    case M_EAGER: w->eager(w->ctx); break;
    case M_REPLAY:
        if (ct_step_run(w->step) != CT_OK) die("ct_step_run");
        break;
    default:
        for (int i = 0; i < g_list_n; i++)
            if (g_real->run(g_cpu, g_list[i]) != CT_OK) die("backend run");
    }
    if (g_async && ct_device_sync(g_dev_name) != CT_OK) die("ct_device_sync");
}

/* Seconds per step, over iters steps. */
static double time_mode(workload *w, mode m, int iters)
{
    double t0 = now_s();
    for (int i = 0; i < iters; i++) run_mode(w, m);
    return (now_s() - t0) / iters;
}

typedef struct row {
    char name[96];
    int n_ops, eager_runs, iters, rounds;
    double t[M_COUNT];        /* median µs per step */
    double over_eager, over_replay; /* median µs of executor time per op */
    double replay_q1, replay_q3;    /* quartiles of the replay's per-round differences */
} row;

static void measure(workload *w, int rounds, double budget_s, row *r)
{
    g_list = malloc(sizeof *g_list * (size_t)(w->n_ops ? w->n_ops : 1));
    if (!g_list) die("malloc");
    g_list_n = g_async && g_n_ops == 0 ? 0 : w->n_ops; /* a captured graph: no op list (see record) */
    memcpy(g_list, g_ops, sizeof *g_list * (size_t)g_list_n);
    /* warm-up, and the iteration count from the slowest mode (eager) */
    for (int m = 0; m < M_COUNT; m++) run_mode(w, (mode)m);
    double one = time_mode(w, M_EAGER, 3);
    int iters = one > 0 ? (int)(budget_s / one) : 1000;
    if (iters < 1) iters = 1;
    if (iters > 100000) iters = 100000;
    double t[M_COUNT][MAX_ROUNDS], de[MAX_ROUNDS], dr[MAX_ROUNDS];
    for (int k = 0; k < rounds; k++) {
        /* The modes take turns step by step (the order rotated, so none always runs
         * first): load that changes over milliseconds hits all three alike. The clock
         * reads around each step are the same for every mode and cancel in differences. */
        double sum[M_COUNT] = {0};
        for (int i = 0; i < iters; i++)
            for (int j = 0; j < M_COUNT; j++) {
                int m = (i + j + k) % M_COUNT;
                double t0 = now_s();
                run_mode(w, (mode)m);
                sum[m] += now_s() - t0;
            }
        for (int m = 0; m < M_COUNT; m++) t[m][k] = sum[m] / iters * 1e6;
        de[k] = (t[M_EAGER][k] - t[M_KERNELS][k]) / w->n_ops;
        dr[k] = (t[M_REPLAY][k] - t[M_KERNELS][k]) / w->n_ops;
    }
    snprintf(r->name, sizeof r->name, "%s", w->name);
    r->n_ops = w->n_ops;
    r->eager_runs = w->eager_runs;
    r->iters = iters;
    r->rounds = rounds;
    for (int m = 0; m < M_COUNT; m++) r->t[m] = median(t[m], rounds);
    r->over_eager = median(de, rounds);
    r->over_replay = median(dr, rounds);
    r->replay_q1 = quantile(dr, rounds, 0.25);
    r->replay_q3 = quantile(dr, rounds, 0.75);
    free(g_list);
    g_list = NULL;
}

/* Only one mode, for a profiler: no alternation, no table. */
static void profile(workload *w, mode m, double seconds)
{
    g_list = g_ops;
    g_list_n = w->n_ops;
    int iters = 0;
    double t0 = now_s();
    while (now_s() - t0 < seconds) {
        for (int i = 0; i < 64; i++) run_mode(w, m);
        iters += 64;
    }
    fprintf(stderr, "%s: %d steps, %.3f us per step\n", w->name, iters, (now_s() - t0) / iters * 1e6);
    g_list = NULL;
}

static void print_rows(const row *rows, int n, int threads)
{
    printf("| step | ops/step | eager µs/step | replay µs/step | kernels µs/step | eager µs/op | "
           "executor µs/op, eager | executor µs/op, replay (quartiles) | replay goal ≤ 0.1 |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        /* the goal is judged on the upper quartile: a median inside the noise proves nothing */
        const char *verdict = r->replay_q3 <= 0.1 ? "met" : r->replay_q1 > 0.1 ? "missed" : "within noise";
        printf("| %s | %d | %.2f | %.2f | %.2f | %.3f | %.3f | %.3f (%.3f … %.3f) | %s |\n", r->name, r->n_ops,
               r->t[M_EAGER], r->t[M_REPLAY], r->t[M_KERNELS], r->t[M_EAGER] / r->n_ops, r->over_eager,
               r->over_replay, r->replay_q1, r->replay_q3, verdict);
    }
    printf("\n%s, %d CPU thread%s; medians of %d rounds (eager, replay and the bare kernel loop alternated in each); "
           "executor µs/op = (step time - kernel time) / ops, median of the per-round differences; "
           "eager µs/op = eager step time / ops (kernels included); the goal counts as met when the upper "
           "quartile of the replay's differences is within it, missed when the lower quartile is above it.\n",
           g_dev_name, threads, threads == 1 ? "" : "s", n ? rows[0].rounds : 0);
    for (int i = 0; i < n; i++)
        if (rows[i].eager_runs != rows[i].n_ops)
            printf("note: %s: an eager step issued %d backend runs, the recording %d.\n", rows[i].name,
                   rows[i].eager_runs, rows[i].n_ops);
}

/* ---- main ---- */

static void usage(FILE *f)
{
    fprintf(f, "usage: ctorch-bench-exec [-d DEVICE] [-m MODEL]... [--chain N] [-r ROUNDS] [-t THREADS] [--pos P] [--quick] "
               "[--no-models] [--profile eager|replay|kernels SECONDS]\n"
               "  executor cost per op: eager dispatch vs a replayed recorded step vs the bare kernels,\n"
               "  on a chain of N 1-element adds/muls (default 64) and the decode step of each model\n"
               "  (default: the refdata mini models, %s/mini-a). Markdown on stdout.\n",
            CTORCH_REFDATA_DIR);
}

static int parse_int(const char *s, int lo, int hi, const char *flag)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "ctorch-bench-exec: %s wants an integer in [%d, %d], got '%s'\n", flag, lo, hi, s);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    const char *models[MAX_MODELS];
    int n_models = 0, chain = 64, rounds = 15, threads = 1, pos = 32;
    bool quick = false, no_models = false;
    int prof_mode = -1, prof_s = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool more = i + 1 < argc;
        if (!strcmp(a, "-d") && more) g_dev_name = argv[++i];
        else if (!strcmp(a, "-m") && more) {
            if (n_models == MAX_MODELS) {
                fprintf(stderr, "ctorch-bench-exec: at most %d models\n", MAX_MODELS);
                return 2;
            }
            models[n_models++] = argv[++i];
        } else if (!strcmp(a, "--chain") && more) chain = parse_int(argv[++i], 1, 10000, a);
        else if (!strcmp(a, "-r") && more) rounds = parse_int(argv[++i], 1, MAX_ROUNDS, a);
        else if (!strcmp(a, "-t") && more) threads = parse_int(argv[++i], 1, 1024, a);
        else if (!strcmp(a, "--pos") && more) pos = parse_int(argv[++i], 0, 100000, a);
        else if (!strcmp(a, "--quick")) quick = true;
        else if (!strcmp(a, "--no-models")) no_models = true;
        else if (!strcmp(a, "--profile") && i + 2 < argc) {
            const char *names[M_COUNT] = {"eager", "replay", "kernels"};
            for (int m = 0; m < M_COUNT; m++)
                if (!strcmp(argv[i + 1], names[m])) prof_mode = m;
            if (prof_mode < 0) {
                usage(stderr);
                return 2;
            }
            prof_s = parse_int(argv[i + 2], 1, 3600, a);
            i += 2;
        }
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    static char defaults[3][512];
    if (!n_models && !no_models) {
        const char *names[3] = {"f16", "q8_0", "q4_k_m"};
        for (int i = 0; i < 3; i++) {
            snprintf(defaults[i], sizeof defaults[i], "%s/mini-a/mini-a-%s.gguf", CTORCH_REFDATA_DIR, names[i]);
            FILE *f = fopen(defaults[i], "rb");
            if (!f) {
                fprintf(stderr, "ctorch-bench-exec: %s is absent: decode steps skipped (give -m MODEL)\n",
                        defaults[i]);
                break;
            }
            fclose(f);
            models[n_models++] = defaults[i];
        }
    }
    if (quick) rounds = rounds < 3 ? rounds : 3;
    double budget = quick ? 0.005 : 0.05;
    char tv[16];
    snprintf(tv, sizeof tv, "%d", threads);
    setenv("CTORCH_THREADS", tv, 1);
    setenv("CTORCH_REPLAY", "1", 1);
    g_async = strcmp(g_dev_name, "cpu") != 0;
    if (g_async) {
        char chain_spec[96];
        snprintf(chain_spec, sizeof chain_spec, "%s,cpu", g_dev_name);
        setenv("CTORCH_DEVICES", chain_spec, 1);
    }
    TRY(ct_exec_init());
    if (ct_exec_stats_requested())
        fprintf(stderr, "ctorch-bench-exec: note: CTORCH_STATS is set, so every replayed op is timed\n");
    g_cpu = exec_find_device(g_dev_name);
    if (!g_cpu || ct_chain_length() != (g_async ? 2 : 1)) {
        fprintf(stderr, "ctorch-bench-exec: needs a chain of %s%s (is the device there?)\n", g_dev_name,
                g_async ? " then the CPU" : " alone (CTORCH_DEVICES=cpu)");
        return 1;
    }
    if (g_async) ct_exec_set_small_bytes(0); /* the chain's 1-element ops go to the device too */
    g_real = g_cpu->ops;
    g_wrapped = *g_real;
    g_wrapped.run = wrapped_run;
    g_ops = malloc(sizeof *g_ops * MAX_OPS);
    if (!g_ops) die("malloc");

    row rows[1 + MAX_MODELS];
    int n_rows = 0;
    {
        int64_t one[1] = {1};
        chain_ctx c = {NULL, NULL, chain};
        TRY(ct_ones(1, one, CT_F32, &c.a));
        TRY(ct_full(1, one, CT_F32, 1.0001, &c.b));
        if (g_async) {
            TRY(ct_tensor_place(c.a, g_dev_name));
            TRY(ct_tensor_place(c.b, g_dev_name));
        }
        workload w = {.eager = chain_eager, .ctx = &c};
        snprintf(w.name, sizeof w.name, "chain of %d add/mul, [1] f32", chain);
        fprintf(stderr, "%s ...\n", w.name);
        record(&w, NULL);
        if (prof_mode >= 0) profile(&w, (mode)prof_mode, prof_s);
        else measure(&w, rounds, budget, &rows[n_rows++]);
        ct_step_free(w.step);
        ct_tensor_free(c.a);
        ct_tensor_free(c.b);
    }
    for (int i = 0; i < n_models; i++) {
        decode_ctx *d = decode_open(models[i], pos);
        workload w = {.eager = decode_eager, .ctx = d};
        const char *base = strrchr(models[i], '/');
        snprintf(w.name, sizeof w.name, "decode %s, pos %d", base ? base + 1 : models[i], pos);
        fprintf(stderr, "%s ...\n", w.name);
        record(&w, &d->logits);
        if (prof_mode >= 0) profile(&w, (mode)prof_mode, prof_s);
        else measure(&w, rounds, budget, &rows[n_rows++]);
        ct_step_free(w.step);
        decode_close(d);
    }
    if (prof_mode < 0) print_rows(rows, n_rows, threads);
    free(g_ops);
    ct_exec_shutdown();
    return 0;
}
