/* Writes the seed corpus for fuzz_gguf (fuzz/corpus; no .gguf suffix, which git ignores) with ctorch's own
 * GGUF writer: small v2/v3 files covering every value type, nested arrays,
 * a vocabulary, plain and quantized tensors, an unsupported tensor type and a
 * truncated file. Usage: gen_corpus DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"

static int fail(const char *what)
{
    fprintf(stderr, "gen_corpus: %s: %s\n", what, ct_last_error());
    return 1;
}

static void metadata(gguf_writer *w)
{
    gguf_writer_set_str(w, "general.architecture", "llama");
    gguf_writer_set_str(w, "general.name", "seed");
    gguf_writer_set_u32(w, "llama.block_count", 1);
    gguf_writer_set_u32(w, "llama.embedding_length", 32);
    gguf_writer_set_f32(w, "llama.rope.freq_base", 10000.0f);
    gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    gguf_writer_set_u8(w, "t.u8", 7);
    gguf_writer_set_i8(w, "t.i8", -7);
    gguf_writer_set_u16(w, "t.u16", 700);
    gguf_writer_set_i16(w, "t.i16", -700);
    gguf_writer_set_i32(w, "t.i32", -70000);
    gguf_writer_set_u64(w, "t.u64", 1ull << 40);
    gguf_writer_set_i64(w, "t.i64", -(1ll << 40));
    gguf_writer_set_f64(w, "t.f64", 0.125);
    gguf_writer_set_arr(w, "t.arr_i32", GGUF_TYPE_INT32, (int32_t[]){1, -2, 3}, 3);
    gguf_writer_set_arr(w, "t.arr_bool", GGUF_TYPE_BOOL, (uint8_t[]){0, 1}, 2);
    gguf_writer_set_arr_str(w, "t.arr_str", (const char *const[]){"<s>", "</s>", "a", "", "\xe2\x96\x81the"}, 5);
    /* [[1], [2, 3]] of u16 */
    uint8_t raw[64];
    size_t n = 0;
    uint32_t u32;
    uint64_t u64;
#define P32(v) (u32 = (v), memcpy(raw + n, &u32, 4), n += 4)
#define P64(v) (u64 = (v), memcpy(raw + n, &u64, 8), n += 8)
    P32(GGUF_TYPE_ARRAY); P64(2);
    P32(GGUF_TYPE_UINT16); P64(1); raw[n++] = 1; raw[n++] = 0;
    P32(GGUF_TYPE_UINT16); P64(2); raw[n++] = 2; raw[n++] = 0; raw[n++] = 3; raw[n++] = 0;
    gguf_writer_set_raw(w, "t.nested", GGUF_TYPE_ARRAY, raw, n);
}

static int write(gguf_writer *w, const char *dir, const char *name, size_t cut)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    void *mem;
    size_t size;
    if (gguf_writer_write_memory(w, &mem, &size) != CT_OK) return fail(name);
    if (cut && cut < size) size = cut;
    FILE *fp = fopen(path, "wb");
    int rc = !fp || fwrite(mem, 1, size, fp) != size;
    if (fp) rc |= fclose(fp) != 0;
    free(mem);
    gguf_writer_free(w);
    if (rc) fprintf(stderr, "gen_corpus: cannot write %s\n", path);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_corpus DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    static float f32[8] = {0, 1, -1, 0.5f, 2, -2, 3, 1e-3f};
    static uint8_t q8[34], q4k[144], q6k[210], iq2[66], i8[4] = {1, 2, 3, 4};
    static uint16_t f16[6];
    for (int i = 0; i < 34; i++) q8[i] = (uint8_t)(i * 5);
    for (int i = 0; i < 144; i++) q4k[i] = (uint8_t)(i * 3);
    for (int i = 0; i < 210; i++) q6k[i] = (uint8_t)(i * 11);
    for (int i = 0; i < 66; i++) iq2[i] = (uint8_t)i;
    for (int i = 0; i < 6; i++) f16[i] = ct_f32_to_f16((float)i);
    int rc = 0;

    gguf_writer *w = gguf_writer_new();
    metadata(w);
    gguf_writer_add_tensor(w, "token_embd.weight", CT_F32, 2, (int64_t[]){2, 4}, f32);
    gguf_writer_add_tensor(w, "blk.0.attn_q.weight", CT_Q8_0, 2, (int64_t[]){1, 32}, q8);
    gguf_writer_add_tensor(w, "blk.0.attn_norm.weight", CT_I8, 1, (int64_t[]){4}, i8);
    rc |= write(w, dir, "v3_small", 0);

    w = gguf_writer_new();
    gguf_writer_set_version(w, 2);
    gguf_writer_set_u32(w, "general.alignment", 64);
    metadata(w);
    gguf_writer_add_tensor(w, "a", CT_F32, 1, (int64_t[]){8}, f32);
    gguf_writer_add_tensor(w, "b", CT_F16, 3, (int64_t[]){1, 3, 2}, f16);
    rc |= write(w, dir, "v2_align64", 0);

    w = gguf_writer_new();
    gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    const char *toks[12] = {"<unk>", "<s>", "</s>", "<0x0A>", "\xe2\x96\x81", "a", "b", "ab", "\xe2\x96\x81\x61", "c", "abc", "."};
    float scores[12];
    int32_t types[12];
    for (int i = 0; i < 12; i++) scores[i] = -(float)i, types[i] = i < 3 ? 3 : i == 3 ? 6 : 1;
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 12);
    gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, 12);
    gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 12);
    gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const[]){"a b", "ab c"}, 2);
    gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    rc |= write(w, dir, "vocab", 0);

    w = gguf_writer_new();
    gguf_writer_set_u32(w, "general.file_type", 15);
    gguf_writer_add_tensor(w, "q4k", CT_Q4_K, 1, (int64_t[]){256}, q4k);
    gguf_writer_add_tensor(w, "q6k", CT_Q6_K, 2, (int64_t[]){1, 256}, q6k);
    gguf_writer_add_tensor_raw(w, "iq2", 16, 1, (int64_t[]){256}, iq2, sizeof iq2);
    rc |= write(w, dir, "quant", 0);

    w = gguf_writer_new();
    rc |= write(w, dir, "empty", 0);

    w = gguf_writer_new();
    metadata(w);
    gguf_writer_add_tensor(w, "token_embd.weight", CT_F32, 2, (int64_t[]){2, 4}, f32);
    rc |= write(w, dir, "truncated", 300);
    return rc;
}
