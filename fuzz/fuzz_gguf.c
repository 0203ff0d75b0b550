/* libFuzzer harness for the GGUF reader: parse, walk every value and tensor,
 * wrap small tensors, then copy the file through the writer and check that it
 * reads back the same. Any crash, sanitizer report, leak or trap is a bug. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"

static void walk_value(const gguf_file *f, const gguf_value *v, int depth)
{
    double d;
    int64_t i;
    (void)gguf_value_as_f64(v, &d);
    (void)gguf_value_as_i64(v, &i);
    if (v->type != GGUF_TYPE_ARRAY || depth > 3) return;
    /* first and last few elements: O(1) each for flat arrays, and nested ones get walked */
    for (uint64_t k = 0; k < v->n && k < 8; k++) {
        gguf_value e;
        if (gguf_value_elem(f, v, k, &e) == CT_OK) walk_value(f, &e, depth + 1);
        if (v->n > 8 && gguf_value_elem(f, v, v->n - 1 - k, &e) == CT_OK) walk_value(f, &e, depth + 1);
    }
}

/* Every accepted file survives a rewrite: same keys, value bytes, tensors and data. */
static void check_rewrite(const gguf_file *f)
{
    gguf_writer *w = gguf_writer_new();
    if (!w) return;
    gguf_writer_set_version(w, gguf_version(f));
    for (int64_t k = 0; k < gguf_kv_count(f); k++) {
        if (gguf_writer_copy_kv(w, f, k) != CT_OK) __builtin_trap();
    }
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (gguf_writer_add_tensor_raw(w, t->name, t->ggml_type, t->n_dims, t->ne, t->data, t->size) != CT_OK)
            __builtin_trap();
    }
    void *mem = NULL;
    size_t size = 0;
    gguf_file *g = NULL;
    if (gguf_writer_write_memory(w, &mem, &size) != CT_OK || gguf_open_memory(mem, size, "rewrite", &g) != CT_OK)
        __builtin_trap();
    gguf_writer_free(w);
    if (gguf_kv_count(g) != gguf_kv_count(f) || gguf_tensor_count(g) != gguf_tensor_count(f)) __builtin_trap();
    for (int64_t k = 0; k < gguf_kv_count(f); k++) {
        gguf_value a, b;
        gguf_kv_value(f, k, &a);
        gguf_kv_value(g, k, &b);
        if (strcmp(gguf_kv_key(f, k), gguf_kv_key(g, k)) || a.type != b.type || a.size != b.size ||
            memcmp(a.ptr, b.ptr, (size_t)a.size))
            __builtin_trap();
    }
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *a = gguf_tensor_at(f, i), *b = gguf_tensor_at(g, i);
        if (strcmp(a->name, b->name) || a->ggml_type != b->ggml_type || a->size != b->size ||
            memcmp(a->ne, b->ne, sizeof a->ne) || memcmp(a->data, b->data, a->size))
            __builtin_trap();
    }
    gguf_close(g);
    free(mem);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gguf_file *f = NULL;
    if (gguf_open_memory(data, size, "fuzz", &f) != CT_OK) return 0;
    for (int64_t k = 0; k < gguf_kv_count(f); k++) {
        const char *key = gguf_kv_key(f, k);
        if (gguf_find_key(f, key) != k) __builtin_trap(); /* index must agree with the list */
        gguf_value v;
        if (gguf_kv_value(f, k, &v) == CT_OK) walk_value(f, &v, 0);
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        float f32;
        bool b;
        const char *s;
        size_t len;
        gguf_type et;
        uint64_t n;
        const void *arr;
        (void)gguf_get_u32(f, key, &u32);
        (void)gguf_get_i64(f, key, &i64);
        (void)gguf_get_u64(f, key, &u64);
        (void)gguf_get_f32(f, key, &f32);
        (void)gguf_get_bool(f, key, &b);
        if (gguf_get_str(f, key, &s, &len) == CT_OK && len) (void)*(volatile const char *)(s + len - 1);
        if (gguf_get_arr(f, key, &et, &n, &arr) == CT_OK && n) {
            if (arr) (void)*(volatile const uint8_t *)((const uint8_t *)arr + n * gguf_type_size(et) - 1);
            if (gguf_get_arr_str(f, key, n - 1, &s, &len) == CT_OK && len)
                (void)*(volatile const char *)(s + len - 1);
        }
    }
    for (int64_t k = 0; k < gguf_tensor_count(f); k++) {
        const gguf_tensor *t = gguf_tensor_at(f, k);
        if (gguf_find_tensor(f, t->name) != t) __builtin_trap();
        if (t->size) (void)*(volatile const uint8_t *)((const uint8_t *)t->data + t->size - 1);
        ct_tensor *ct = NULL;
        if (gguf_tensor_numel(t) <= 4096 && gguf_tensor_to_ct(f, t, &ct) == CT_OK) {
            if (ct_tensor_nbytes(ct) != t->size) __builtin_trap();
            ct_tensor_free(ct);
        }
    }
    if (gguf_file_size(f) <= 1 << 20) check_rewrite(f);
    gguf_close(f);
    return 0;
}
