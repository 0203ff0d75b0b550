/* GGUF value types, ggml tensor types, the name index and the value validator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "formats/gguf_internal.h"

const char *gguf_type_name(gguf_type t)
{
    static const char *names[GGUF_TYPE_COUNT] = {"u8",  "i8",  "u16", "i16", "u32", "i32", "f32",
                                                 "bool", "str", "arr", "u64", "i64", "f64"};
    return (unsigned)t < GGUF_TYPE_COUNT ? names[t] : "?";
}

size_t gguf_type_size(gguf_type t)
{
    static const size_t sizes[GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return (unsigned)t < GGUF_TYPE_COUNT ? sizes[t] : 0;
}

/* Every ggml type id a current GGUF may carry, with its block geometry, so a
 * file with types ctorch cannot compute on still opens and can be listed.
 * Ids missing here (4, 5, 31-33, 36-38: removed from ggml) are invalid. */
typedef struct ggml_type_info {
    const char *name;
    int64_t block;
    size_t bytes;
    int dtype; /* ct_dtype, or -1 */
} ggml_type_info;

static const ggml_type_info g_ggml[] = {
    [0] = {"F32", 1, 4, CT_F32},          [1] = {"F16", 1, 2, CT_F16},
    [2] = {"Q4_0", 32, 18, CT_Q4_0},      [3] = {"Q4_1", 32, 20, CT_Q4_1},
    [6] = {"Q5_0", 32, 22, CT_Q5_0},      [7] = {"Q5_1", 32, 24, CT_Q5_1},
    [8] = {"Q8_0", 32, 34, CT_Q8_0},      [9] = {"Q8_1", 32, 36, CT_Q8_1},
    [10] = {"Q2_K", 256, 84, CT_Q2_K},    [11] = {"Q3_K", 256, 110, CT_Q3_K},
    [12] = {"Q4_K", 256, 144, CT_Q4_K},   [13] = {"Q5_K", 256, 176, CT_Q5_K},
    [14] = {"Q6_K", 256, 210, CT_Q6_K},   [15] = {"Q8_K", 256, 292, CT_Q8_K},
    [16] = {"IQ2_XXS", 256, 66, -1},      [17] = {"IQ2_XS", 256, 74, -1},
    [18] = {"IQ3_XXS", 256, 98, -1},      [19] = {"IQ1_S", 256, 50, -1},
    [20] = {"IQ4_NL", 32, 18, -1},        [21] = {"IQ3_S", 256, 110, -1},
    [22] = {"IQ2_S", 256, 82, -1},        [23] = {"IQ4_XS", 256, 136, -1},
    [24] = {"I8", 1, 1, CT_I8},           [25] = {"I16", 1, 2, -1},
    [26] = {"I32", 1, 4, CT_I32},         [27] = {"I64", 1, 8, CT_I64},
    [28] = {"F64", 1, 8, CT_F64},         [29] = {"IQ1_M", 256, 56, -1},
    [30] = {"BF16", 1, 2, CT_BF16},       [34] = {"TQ1_0", 256, 54, -1},
    [35] = {"TQ2_0", 256, 66, -1},        [39] = {"MXFP4", 32, 17, -1},
};
#define N_GGML (sizeof g_ggml / sizeof g_ggml[0])

static const ggml_type_info *ggml_info(uint32_t id) { return id < N_GGML && g_ggml[id].name ? &g_ggml[id] : NULL; }

bool gguf_ggml_block(uint32_t ggml_type, int64_t *block, size_t *bytes)
{
    const ggml_type_info *ti = ggml_info(ggml_type);
    if (!ti) return false;
    *block = ti->block;
    *bytes = ti->bytes;
    return true;
}

bool gguf_ggml_to_dtype(uint32_t ggml_type, ct_dtype *out)
{
    const ggml_type_info *ti = ggml_info(ggml_type);
    if (!ti || ti->dtype < 0) return false;
    *out = (ct_dtype)ti->dtype;
    return true;
}

bool gguf_dtype_to_ggml(ct_dtype dt, uint32_t *out)
{
    for (uint32_t i = 0; i < N_GGML; i++)
        if (g_ggml[i].name && g_ggml[i].dtype == (int)dt) {
            *out = i;
            return true;
        }
    return false;
}

const char *gguf_ggml_type_name(uint32_t ggml_type)
{
    const ggml_type_info *ti = ggml_info(ggml_type);
    if (ti) return ti->name;
    static _Thread_local char buf[24];
    snprintf(buf, sizeof buf, "type%u", ggml_type);
    return buf;
}

/* ---- mapping ---- */

void gguf_map_release(gguf_map *m)
{
    if (!m || atomic_fetch_sub(&m->ref, 1) != 1) return;
    if (m->is_mmap && m->addr) munmap(m->addr, m->len);
    free(m);
}

/* ---- name index ---- */

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

ct_status gguf_index_init(gguf_index *ix, int64_t n)
{
    uint64_t cap = 8;
    while (cap < (uint64_t)n * 2) cap <<= 1;
    ix->names = calloc(cap, sizeof *ix->names);
    ix->idx = calloc(cap, sizeof *ix->idx);
    ix->mask = cap - 1;
    if (!ix->names || !ix->idx) {
        gguf_index_free(ix);
        return core_err(CT_ERR_OOM, "gguf: out of memory for a %llu-entry index", (unsigned long long)cap);
    }
    return CT_OK;
}

void gguf_index_free(gguf_index *ix)
{
    free(ix->names);
    free(ix->idx);
    ix->names = NULL;
    ix->idx = NULL;
}

bool gguf_index_insert(gguf_index *ix, const char *name, int64_t i)
{
    for (uint64_t h = hash_name(name) & ix->mask;; h = (h + 1) & ix->mask) {
        if (!ix->names[h]) {
            ix->names[h] = name;
            ix->idx[h] = i;
            return true;
        }
        if (!strcmp(ix->names[h], name)) return false;
    }
}

int64_t gguf_index_find(const gguf_index *ix, const char *name)
{
    if (!ix->names || !name) return -1;
    for (uint64_t h = hash_name(name) & ix->mask;; h = (h + 1) & ix->mask) {
        if (!ix->names[h]) return -1;
        if (!strcmp(ix->names[h], name)) return ix->idx[h];
    }
}

/* ---- value validation ---- */

static ct_status truncated(const gguf_cursor *c, const char *what, uint64_t need)
{
    return core_err(CT_ERR_FORMAT, "gguf '%s': %s at offset %zu needs %llu bytes but only %zu remain (truncated file?)",
                    c->name, what, c->pos, (unsigned long long)need, c->size - c->pos);
}

ct_status gguf_skip_value(gguf_cursor *c, gguf_type type, int depth, const char *what)
{
    size_t left = c->size - c->pos;
    size_t es = gguf_type_size(type);
    if (type == GGUF_TYPE_BOOL) {
        if (left < 1) return truncated(c, what, 1);
        if (c->p[c->pos] > 1)
            return core_err(CT_ERR_FORMAT, "gguf '%s': %s: bool value %u (must be 0 or 1) at offset %zu", c->name, what,
                            c->p[c->pos], c->pos);
        c->pos++;
        return CT_OK;
    }
    if (es) {
        if (left < es) return truncated(c, what, es);
        c->pos += es;
        return CT_OK;
    }
    if (type == GGUF_TYPE_STRING) {
        if (left < 8) return truncated(c, what, 8);
        uint64_t len = gguf_rd64(c->p + c->pos);
        if (len > left - 8)
            return core_err(CT_ERR_FORMAT, "gguf '%s': %s: string length %llu at offset %zu runs past the end of the file (%zu bytes left)",
                            c->name, what, (unsigned long long)len, c->pos, left - 8);
        c->pos += 8 + (size_t)len;
        return CT_OK;
    }
    if (type != GGUF_TYPE_ARRAY)
        return core_err(CT_ERR_FORMAT, "gguf '%s': %s: invalid value type %u at offset %zu", c->name, what, (unsigned)type,
                        c->pos);
    if (depth >= GGUF_MAX_NESTING)
        return core_err(CT_ERR_FORMAT, "gguf '%s': %s: arrays nested deeper than %d at offset %zu", c->name, what,
                        GGUF_MAX_NESTING, c->pos);
    if (left < 12) return truncated(c, what, 12);
    size_t at = c->pos;
    uint32_t et = gguf_rd32(c->p + at);
    uint64_t n = gguf_rd64(c->p + at + 4);
    if (et >= GGUF_TYPE_COUNT)
        return core_err(CT_ERR_FORMAT, "gguf '%s': %s: invalid array element type %u at offset %zu", c->name, what, et, at);
    left -= 12;
    /* smallest encoding of one element: bounds n before any per-element work */
    size_t min_elem = et == GGUF_TYPE_STRING ? 8 : et == GGUF_TYPE_ARRAY ? 12 : gguf_type_size((gguf_type)et);
    if (n > left / min_elem)
        return core_err(CT_ERR_FORMAT, "gguf '%s': %s: array of %llu %s elements at offset %zu does not fit in the %zu bytes left",
                        c->name, what, (unsigned long long)n, gguf_type_name((gguf_type)et), at, left);
    c->pos += 12;
    if (et != GGUF_TYPE_STRING && et != GGUF_TYPE_ARRAY && et != GGUF_TYPE_BOOL) {
        c->pos += (size_t)n * min_elem;
        return CT_OK;
    }
    for (uint64_t i = 0; i < n; i++) {
        ct_status s = gguf_skip_value(c, (gguf_type)et, depth + 1, what);
        if (s != CT_OK) return s;
    }
    return CT_OK;
}
