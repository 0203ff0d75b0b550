/* The GGUF writer's argument checks, each a clear error naming the key or tensor and
 * the rule it breaks, and `ctorch quantize`'s float targets (F16, BF16): weights
 * converted with round-to-nearest-even, norms and other 1-D tensors kept as f32, the
 * file type recorded; values exactly representable in the target come back exactly. */
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "formats/quantize.h"
#include "harness.h"

static bool msg_has(const char *needle)
{
    bool ok = strstr(ct_last_error(), needle) != NULL;
    if (!ok) fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", ct_last_error(), needle);
    return ok;
}

static void test_metadata_args(void)
{
    gguf_writer *w = gguf_writer_new();
    if (!w) return;
    CHECK_STATUS(gguf_writer_set_version(NULL, 3), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_set_version(w, 4), CT_ERR_INVALID_ARG);
    CHECK(msg_has("version 4"));
    CHECK_OK(gguf_writer_set_version(w, 2));
    CHECK_STATUS(gguf_writer_set_u32(NULL, "a.b", 1), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_set_u32(w, NULL, 1), CT_ERR_INVALID_ARG);
    CHECK(msg_has("null writer or key"));
    CHECK_STATUS(gguf_writer_set_u32(w, "", 1), CT_ERR_INVALID_ARG);
    CHECK(msg_has("key of length 0"));
    CHECK_STATUS(gguf_writer_set_str(w, "s.null", NULL), CT_ERR_INVALID_ARG);
    CHECK(msg_has("null string for 's.null'"));
    CHECK_STATUS(gguf_writer_set_strn(w, "s.nulln", NULL, 3), CT_ERR_INVALID_ARG);
    CHECK(msg_has("null string for 's.nulln'"));
    CHECK_OK(gguf_writer_set_strn(w, "s.empty", NULL, 0)); /* an empty string needs no pointer */
    CHECK_STATUS(gguf_writer_set_arr(w, "a.null", GGUF_TYPE_UINT8, NULL, 3), CT_ERR_INVALID_ARG);
    CHECK(msg_has("'a.null': bad array (3 elements)"));
    CHECK_OK(gguf_writer_set_arr(w, "a.empty", GGUF_TYPE_UINT8, NULL, 0));
    CHECK_STATUS(gguf_writer_set_arr_str(w, "as.null", NULL, 2), CT_ERR_INVALID_ARG);
    CHECK(msg_has("'as.null': null string array"));
    CHECK_STATUS(gguf_writer_set_raw(w, "r.null", GGUF_TYPE_UINT32, NULL, 4), CT_ERR_INVALID_ARG);
    CHECK(msg_has("'r.null': null payload"));
    /* what was accepted is written and reads back */
    void *data = NULL;
    size_t size = 0;
    CHECK_STATUS(gguf_writer_write_memory(NULL, &data, &size), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_write_memory(w, NULL, &size), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_write(w, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_write(NULL, "/tmp/x.gguf"), CT_ERR_INVALID_ARG);
    CHECK_OK(gguf_writer_write_memory(w, &data, &size));
    gguf_file *f = NULL;
    if (data) CHECK_OK(gguf_open_memory(data, size, "mem", &f));
    if (f) {
        CHECK(gguf_kv_count(f) == 2);
        const char *s = NULL;
        size_t len = 99;
        CHECK_OK(gguf_get_str(f, "s.empty", &s, &len));
        CHECK(len == 0);
        gguf_type et;
        uint64_t n = 9;
        const void *p;
        CHECK_OK(gguf_get_arr(f, "a.empty", &et, &n, &p));
        CHECK(n == 0 && et == GGUF_TYPE_UINT8);
        gguf_close(f);
    }
    free(data);
    gguf_writer_set_cancel(NULL, NULL); /* no writer: nothing to do */
    gguf_writer_free(w);
}

static void test_tensor_args(void)
{
    gguf_writer *w = gguf_writer_new();
    if (!w) return;
    float f[64] = {0};
    int64_t ne[5] = {32, 2, 1, 1, 1}, zero[2] = {0, 2}, odd[1] = {31};
    CHECK_STATUS(gguf_writer_add_tensor_raw(w, NULL, 0, 1, ne, f, 128), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_add_tensor_raw(w, "t", 0, 1, NULL, f, 128), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_add_tensor_raw(w, "t", 0, 0, ne, f, 128), CT_ERR_INVALID_ARG);
    CHECK(msg_has("'t': 0 dims (must be 1..4)"));
    CHECK_STATUS(gguf_writer_add_tensor_raw(w, "t", 0, 5, ne, f, 128), CT_ERR_INVALID_ARG);
    CHECK(msg_has("'t': 5 dims"));
    CHECK_STATUS(gguf_writer_add_tensor_raw(w, "t", 0, 2, zero, f, 0), CT_ERR_INVALID_ARG);
    CHECK(msg_has("'t': bad dimension ne[0] = 0"));
    CHECK_STATUS(gguf_writer_add_tensor_raw(w, "t", 8 /* Q8_0 */, 1, odd, f, 34), CT_ERR_INVALID_ARG);
    CHECK(msg_has("'t': row length 31 is not a multiple of the Q8_0 block size 32"));
    CHECK_STATUS(gguf_writer_add_tensor_raw(w, "t", 0, 2, ne, f, 100), CT_ERR_INVALID_ARG);
    CHECK(msg_has("'t': 100 bytes of data given, F32 needs 256"));
    CHECK_STATUS(gguf_writer_add_tensor_raw(w, "t", 0, 2, ne, NULL, 256), CT_ERR_INVALID_ARG);
    CHECK(msg_has("256 bytes of data given"));
    /* the ct-shaped form: dims outermost first, checked before the raw form */
    int64_t s2[2] = {2, 32}, sbad[2] = {2, -1}, sq[1] = {31};
    CHECK_STATUS(gguf_writer_add_tensor(w, "u", CT_F32, 0, s2, f), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_add_tensor(w, "u", CT_F32, 2, NULL, f), CT_ERR_INVALID_ARG);
    CHECK(msg_has("'u': 2 dims (must be 1..4)"));
    CHECK_STATUS(gguf_writer_add_tensor(w, "u", CT_F32, 2, sbad, f), CT_ERR_SHAPE);
    CHECK(msg_has("'u': bad shape dim -1"));
    CHECK_STATUS(gguf_writer_add_tensor(w, "u", CT_Q8_0, 1, sq, f), CT_ERR_SHAPE);
    CHECK(msg_has("'u': last dim 31 is not a multiple of the q8_0 block size"));
    CHECK_OK(gguf_writer_add_tensor(w, "u", CT_F32, 2, s2, f));
    void *data = NULL;
    size_t size = 0;
    CHECK_OK(gguf_writer_write_memory(w, &data, &size));
    gguf_file *gf = NULL;
    if (data) CHECK_OK(gguf_open_memory(data, size, "mem", &gf));
    if (gf) {
        const gguf_tensor *t = gguf_find_tensor(gf, "u");
        CHECK(gguf_tensor_count(gf) == 1 && t && t->n_dims == 2 && t->ne[0] == 32 && t->ne[1] == 2);
        gguf_close(gf);
    }
    free(data);
    gguf_writer_free(w);
}

static const char *tmp(const char *name, char *buf, size_t n)
{
    const char *dir = getenv("CTORCH_TEST_TMP");
    snprintf(buf, n, "%s/%s", dir && *dir ? dir : "/tmp", name);
    return buf;
}

/* F16 and BF16 targets: a weight [4, 64] of k/256 (exact in both, since |k| < 256 needs
 * at most 8 significant bits) plus one value between two representable ones. */
static void test_float_targets(void)
{
    enum { R = 4, C = 64 };
    float wv[R * C], nv[C];
    for (int i = 0; i < R * C; i++) wv[i] = (float)((i * 37) % 511 - 255) / 256.0f;
    wv[5] = 1.0f + 0x1p-12f; /* below half an ulp of 1 in both formats: rounds to 1 */
    for (int i = 0; i < C; i++) nv[i] = 1.0f + (float)i * 0x1p-20f; /* not representable in f16: kept f32 */
    char in[512], out[512];
    gguf_writer *w = gguf_writer_new();
    CHECK_OK(gguf_writer_set_str(w, "general.architecture", "llama"));
    CHECK_OK(gguf_writer_set_u32(w, "llama.block_count", 1));
    int64_t sw[2] = {R, C}, sn[1] = {C};
    CHECK_OK(gguf_writer_add_tensor(w, "blk.0.ffn_up.weight", CT_F32, 2, sw, wv));
    CHECK_OK(gguf_writer_add_tensor(w, "blk.0.attn_norm.weight", CT_F32, 1, sn, nv));
    CHECK_OK(gguf_writer_write(w, tmp("float_target_in.gguf", in, sizeof in)));
    gguf_writer_free(w);
    static const struct {
        const char *mix;
        ct_dtype dt;
        int ftype;
    } targets[] = {{"F16", CT_F16, 1}, {"bf16", CT_BF16, 32}};
    for (int k = 0; k < 2; k++) {
        quantize_report rep = {0};
        CHECK_OK(quantize_file(in, tmp("float_target_out.gguf", out, sizeof out), targets[k].mix, NULL, &rep));
        CHECK(rep.n_tensors == 2);
        gguf_file *f = NULL;
        CHECK_OK(gguf_open(out, &f));
        if (!f) continue;
        int64_t ft = 0;
        CHECK_OK(gguf_get_i64(f, "general.file_type", &ft));
        CHECK(ft == targets[k].ftype);
        const gguf_tensor *tw = gguf_find_tensor(f, "blk.0.ffn_up.weight"), *tn = gguf_find_tensor(f, "blk.0.attn_norm.weight");
        CHECK(tw && tw->dtype == targets[k].dt && tn && tn->dtype == CT_F32);
        if (tw && tn) {
            ct_tensor *t = NULL;
            CHECK_OK(gguf_tensor_to_ct(f, tw, &t));
            double *v = t ? th_values(t) : NULL;
            for (int i = 0; v && i < R * C; i++) {
                double want = i == 5 ? 1.0 : (double)wv[i];
                CHECK_MSG(v[i] == want, "%s [%d]: %.9g vs %.9g", targets[k].mix, i, v[i], want);
            }
            free(v);
            ct_tensor_free(t);
            CHECK(!memcmp(tn->data, nv, sizeof nv));
        }
        gguf_close(f);
        remove(out);
    }
    remove(in);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_metadata_args);
    RUN(test_tensor_args);
    RUN(test_float_targets);
    return th_finish();
}
