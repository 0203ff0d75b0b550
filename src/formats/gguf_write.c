/* GGUF writer: metadata values are encoded when set (so the writer owns
 * plain bytes), tensors are borrowed until written. Layout: header, kvs,
 * tensor infos, zero padding to the alignment, then each tensor's data padded
 * to the alignment (also the last one, as ggml's reader expects). Rewriting a
 * llama.cpp-made file through this writer reproduces it byte for byte. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/atomic_file.h"
#include "formats/gguf_internal.h"

typedef struct wkv {
    char *key;
    gguf_type type;
    uint8_t *payload; /* the value's bytes as stored after the type field */
    size_t size;
} wkv;

typedef struct wtensor {
    char *name;
    uint32_t ggml_type;
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    const void *data; /* borrowed */
    size_t size;
    uint64_t offset; /* assigned at write time */
} wtensor;

struct gguf_writer {
    uint32_t version;
    uint32_t alignment;
    wkv *kvs;
    int64_t n_kv, cap_kv;
    wtensor *ts;
    int64_t n_t, cap_t;
    volatile sig_atomic_t *cancel; /* optional: nonzero stops gguf_writer_write */
};

typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} wbuf;

static void put(wbuf *b, const void *data, size_t n)
{
    if (b->oom) return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n < n) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void put_u32(wbuf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}

static void put_u64(wbuf *b, uint64_t v)
{
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}

static void put_str(wbuf *b, const char *s, size_t len)
{
    put_u64(b, len);
    put(b, s, len);
}

gguf_writer *gguf_writer_new(void)
{
    gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->version = 3;
    w->alignment = GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void gguf_writer_free(gguf_writer *w)
{
    if (!w) return;
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kvs[i].key);
        free(w->kvs[i].payload);
    }
    for (int64_t i = 0; i < w->n_t; i++) free(w->ts[i].name);
    free(w->kvs);
    free(w->ts);
    free(w);
}

ct_status gguf_writer_set_version(gguf_writer *w, uint32_t version)
{
    if (!w || (version != 2 && version != 3))
        return core_err(CT_ERR_INVALID_ARG, "gguf writer: version %u (only 2 and 3 can be written)", version);
    w->version = version;
    return CT_OK;
}

/* Takes ownership of payload (freed on failure too). */
static ct_status set_value(gguf_writer *w, const char *key, gguf_type type, uint8_t *payload, size_t size)
{
    ct_status s = CT_OK;
    size_t klen = key ? strlen(key) : 0;
    if (!w || !key) s = core_err(CT_ERR_INVALID_ARG, "gguf writer: null writer or key");
    else if (klen == 0 || klen > GGUF_MAX_KEY)
        s = core_err(CT_ERR_INVALID_ARG, "gguf writer: key of length %zu (must be 1..%d)", klen, GGUF_MAX_KEY);
    else if (!strcmp(key, "general.alignment")) {
        uint32_t a = size == 4 ? gguf_rd32(payload) : 0;
        if (type != GGUF_TYPE_UINT32 || a == 0 || (a & (a - 1)))
            s = core_err(CT_ERR_INVALID_ARG, "gguf writer: general.alignment must be a u32 power of two");
        else
            w->alignment = a;
    }
    if (s != CT_OK) {
        free(payload);
        return s;
    }
    for (int64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kvs[i].key, key)) {
            free(w->kvs[i].payload);
            w->kvs[i].type = type;
            w->kvs[i].payload = payload;
            w->kvs[i].size = size;
            return CT_OK;
        }
    if (w->n_kv == w->cap_kv) {
        int64_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
        wkv *kvs = realloc(w->kvs, (size_t)cap * sizeof *kvs);
        if (!kvs) {
            free(payload);
            return core_err(CT_ERR_OOM, "gguf writer: out of memory");
        }
        w->kvs = kvs;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(payload);
        return core_err(CT_ERR_OOM, "gguf writer: out of memory");
    }
    w->kvs[w->n_kv++] = (wkv){k, type, payload, size};
    return CT_OK;
}

static ct_status set_bytes(gguf_writer *w, const char *key, gguf_type type, const void *data, size_t size)
{
    uint8_t *p = malloc(size ? size : 1);
    if (!p) return core_err(CT_ERR_OOM, "gguf writer: out of memory");
    memcpy(p, data, size);
    return set_value(w, key, type, p, size);
}

static ct_status set_buf(gguf_writer *w, const char *key, gguf_type type, wbuf *b)
{
    if (b->oom) {
        free(b->p);
        return core_err(CT_ERR_OOM, "gguf writer: out of memory encoding '%s'", key ? key : "");
    }
    return set_value(w, key, type, b->p, b->n);
}

/* Scalars are stored little-endian; this host is little-endian (x86-64/aarch64). */
ct_status gguf_writer_set_u8(gguf_writer *w, const char *key, uint8_t v) { return set_bytes(w, key, GGUF_TYPE_UINT8, &v, 1); }
ct_status gguf_writer_set_i8(gguf_writer *w, const char *key, int8_t v) { return set_bytes(w, key, GGUF_TYPE_INT8, &v, 1); }
ct_status gguf_writer_set_u16(gguf_writer *w, const char *key, uint16_t v) { return set_bytes(w, key, GGUF_TYPE_UINT16, &v, 2); }
ct_status gguf_writer_set_i16(gguf_writer *w, const char *key, int16_t v) { return set_bytes(w, key, GGUF_TYPE_INT16, &v, 2); }
ct_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) { return set_bytes(w, key, GGUF_TYPE_UINT32, &v, 4); }
ct_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) { return set_bytes(w, key, GGUF_TYPE_INT32, &v, 4); }
ct_status gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v) { return set_bytes(w, key, GGUF_TYPE_UINT64, &v, 8); }
ct_status gguf_writer_set_i64(gguf_writer *w, const char *key, int64_t v) { return set_bytes(w, key, GGUF_TYPE_INT64, &v, 8); }
ct_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v) { return set_bytes(w, key, GGUF_TYPE_FLOAT32, &v, 4); }
ct_status gguf_writer_set_f64(gguf_writer *w, const char *key, double v) { return set_bytes(w, key, GGUF_TYPE_FLOAT64, &v, 8); }

ct_status gguf_writer_set_bool(gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v ? 1 : 0;
    return set_bytes(w, key, GGUF_TYPE_BOOL, &b, 1);
}

ct_status gguf_writer_set_strn(gguf_writer *w, const char *key, const char *v, size_t len)
{
    if (!v && len) return core_err(CT_ERR_INVALID_ARG, "gguf writer: null string for '%s'", key ? key : "");
    wbuf b = {0};
    put_str(&b, v, len);
    return set_buf(w, key, GGUF_TYPE_STRING, &b);
}

ct_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v)
{
    if (!v) return core_err(CT_ERR_INVALID_ARG, "gguf writer: null string for '%s'", key ? key : "");
    return gguf_writer_set_strn(w, key, v, strlen(v));
}

ct_status gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem, const void *data, uint64_t n)
{
    size_t es = gguf_type_size(elem);
    if (!es)
        return core_err(CT_ERR_INVALID_ARG, "gguf writer: '%s': set_arr takes numeric or bool elements, not %s",
                        key ? key : "", gguf_type_name(elem));
    if (n > (SIZE_MAX - 12) / es || (!data && n))
        return core_err(CT_ERR_INVALID_ARG, "gguf writer: '%s': bad array (%llu elements)", key ? key : "",
                        (unsigned long long)n);
    if (elem == GGUF_TYPE_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (((const uint8_t *)data)[i] > 1)
                return core_err(CT_ERR_INVALID_ARG, "gguf writer: '%s': bool element %llu is not 0 or 1", key ? key : "",
                                (unsigned long long)i);
    wbuf b = {0};
    put_u32(&b, (uint32_t)elem);
    put_u64(&b, n);
    put(&b, data, (size_t)n * es);
    return set_buf(w, key, GGUF_TYPE_ARRAY, &b);
}

ct_status gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t n)
{
    if (!strs && n) return core_err(CT_ERR_INVALID_ARG, "gguf writer: '%s': null string array", key ? key : "");
    for (uint64_t i = 0; i < n; i++)
        if (!strs[i])
            return core_err(CT_ERR_INVALID_ARG, "gguf writer: '%s': string %llu is NULL", key ? key : "",
                            (unsigned long long)i);
    wbuf b = {0};
    put_u32(&b, GGUF_TYPE_STRING);
    put_u64(&b, n);
    for (uint64_t i = 0; i < n; i++) put_str(&b, strs[i], strlen(strs[i]));
    return set_buf(w, key, GGUF_TYPE_ARRAY, &b);
}

ct_status gguf_writer_set_raw(gguf_writer *w, const char *key, gguf_type type, const void *payload, size_t size)
{
    if (!payload && size) return core_err(CT_ERR_INVALID_ARG, "gguf writer: '%s': null payload", key ? key : "");
    gguf_cursor c = {payload, size, 0, "<writer>"};
    ct_status s = gguf_skip_value(&c, type, 0, key ? key : "value");
    if (s != CT_OK) return core_err(CT_ERR_INVALID_ARG, "gguf writer: raw value rejected: %s", ct_last_error());
    if (c.pos != size)
        return core_err(CT_ERR_INVALID_ARG, "gguf writer: '%s': raw %s value is %zu bytes but %zu were given",
                        key ? key : "", gguf_type_name(type), c.pos, size);
    return set_bytes(w, key, type, payload, size);
}

ct_status gguf_writer_copy_kv(gguf_writer *w, const gguf_file *f, int64_t i)
{
    gguf_value v;
    ct_status s = gguf_kv_value(f, i, &v);
    if (s != CT_OK) return s;
    /* a top-level value's ptr skips the string length / array header */
    size_t head = v.type == GGUF_TYPE_STRING ? 8 : v.type == GGUF_TYPE_ARRAY ? 12 : 0;
    return gguf_writer_set_raw(w, gguf_kv_key(f, i), v.type, v.ptr - head, (size_t)v.size + head);
}

ct_status gguf_writer_add_tensor_raw(gguf_writer *w, const char *name, uint32_t ggml_type, int n_dims, const int64_t *ne,
                                     const void *data, size_t size)
{
    if (!w || !name || !ne) return core_err(CT_ERR_INVALID_ARG, "gguf writer: null writer, name or shape");
    size_t nlen = strlen(name);
    if (nlen == 0 || nlen >= GGUF_MAX_NAME)
        return core_err(CT_ERR_INVALID_ARG, "gguf writer: tensor name '%s' must be 1..%d bytes", name, GGUF_MAX_NAME - 1);
    for (int64_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->ts[i].name, name)) return core_err(CT_ERR_INVALID_ARG, "gguf writer: duplicate tensor '%s'", name);
    int64_t block;
    size_t bbytes;
    if (!gguf_ggml_block(ggml_type, &block, &bbytes))
        return core_err(CT_ERR_INVALID_ARG, "gguf writer: tensor '%s': unknown ggml type %u", name, ggml_type);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return core_err(CT_ERR_INVALID_ARG, "gguf writer: tensor '%s': %d dims (must be 1..%d)", name, n_dims, GGUF_MAX_DIMS);
    wtensor t = {.ggml_type = ggml_type, .n_dims = n_dims, .data = data, .size = size};
    int64_t numel = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] <= 0 || t.ne[d] > INT64_MAX / numel)
            return core_err(CT_ERR_INVALID_ARG, "gguf writer: tensor '%s': bad dimension ne[%d] = %lld", name, d,
                            (long long)t.ne[d]);
        numel *= t.ne[d];
    }
    if (t.ne[0] % block)
        return core_err(CT_ERR_INVALID_ARG, "gguf writer: tensor '%s': row length %lld is not a multiple of the %s block size %lld",
                        name, (long long)t.ne[0], gguf_ggml_type_name(ggml_type), (long long)block);
    uint64_t nblk = (uint64_t)(numel / block);
    if (nblk > SIZE_MAX / bbytes || nblk * bbytes != size || (!data && size))
        return core_err(CT_ERR_INVALID_ARG, "gguf writer: tensor '%s': %zu bytes of data given, %s needs %llu", name, size,
                        gguf_ggml_type_name(ggml_type), (unsigned long long)(nblk * bbytes));
    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? w->cap_t * 2 : 16;
        wtensor *ts = realloc(w->ts, (size_t)cap * sizeof *ts);
        if (!ts) return core_err(CT_ERR_OOM, "gguf writer: out of memory");
        w->ts = ts;
        w->cap_t = cap;
    }
    t.name = strdup(name);
    if (!t.name) return core_err(CT_ERR_OOM, "gguf writer: out of memory");
    w->ts[w->n_t++] = t;
    return CT_OK;
}

ct_status gguf_writer_add_tensor(gguf_writer *w, const char *name, ct_dtype dtype, int ndim, const int64_t *ct_shape,
                                 const void *data)
{
    uint32_t gt;
    if (!gguf_dtype_to_ggml(dtype, &gt))
        return core_err(CT_ERR_DTYPE, "gguf writer: tensor '%s': dtype %s cannot be stored in GGUF", name ? name : "",
                        ct_dtype_name(dtype));
    if (ndim < 1 || ndim > GGUF_MAX_DIMS || !ct_shape)
        return core_err(CT_ERR_INVALID_ARG, "gguf writer: tensor '%s': %d dims (must be 1..%d)", name ? name : "", ndim,
                        GGUF_MAX_DIMS);
    int64_t ne[GGUF_MAX_DIMS], numel = 1;
    for (int d = 0; d < ndim; d++) {
        ne[d] = ct_shape[ndim - 1 - d];
        if (ne[d] <= 0 || ne[d] > INT64_MAX / numel)
            return core_err(CT_ERR_SHAPE, "gguf writer: tensor '%s': bad shape dim %lld", name ? name : "", (long long)ne[d]);
        numel *= ne[d];
    }
    if (ne[0] % ct_dtype_block_size(dtype))
        return core_err(CT_ERR_SHAPE, "gguf writer: tensor '%s': last dim %lld is not a multiple of the %s block size",
                        name ? name : "", (long long)ne[0], ct_dtype_name(dtype));
    return gguf_writer_add_tensor_raw(w, name, gt, ndim, ne, data, ct_dtype_row_bytes(dtype, numel));
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Header through the padding before the data; assigns tensor offsets. */
static ct_status build_header(gguf_writer *w, wbuf *b, uint64_t *data_size)
{
    put(b, GGUF_MAGIC, 4);
    put_u32(b, w->version);
    put_u64(b, (uint64_t)w->n_t);
    put_u64(b, (uint64_t)w->n_kv);
    for (int64_t i = 0; i < w->n_kv; i++) {
        put_str(b, w->kvs[i].key, strlen(w->kvs[i].key));
        put_u32(b, w->kvs[i].type);
        put(b, w->kvs[i].payload, w->kvs[i].size);
    }
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        wtensor *t = &w->ts[i];
        put_str(b, t->name, strlen(t->name));
        put_u32(b, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) put_u64(b, (uint64_t)t->ne[d]);
        put_u32(b, t->ggml_type);
        t->offset = off;
        put_u64(b, off);
        off = align_up(off + t->size, w->alignment);
    }
    static const uint8_t zeros[256];
    /* no data section, no padding: what llama.cpp's tools write for vocab-only files */
    size_t pad = w->n_t ? (size_t)(align_up(b->n, w->alignment) - b->n) : 0;
    while (pad) {
        size_t k = pad < sizeof zeros ? pad : sizeof zeros;
        put(b, zeros, k);
        pad -= k;
    }
    *data_size = off;
    if (b->oom) return core_err(CT_ERR_OOM, "gguf writer: out of memory building the header");
    return CT_OK;
}

ct_status gguf_writer_write_memory(gguf_writer *w, void **data, size_t *size)
{
    if (!w || !data || !size) return core_err(CT_ERR_INVALID_ARG, "gguf_writer_write_memory: null argument");
    wbuf b = {0};
    uint64_t dsize;
    ct_status s = build_header(w, &b, &dsize);
    if (s == CT_OK && dsize > SIZE_MAX - b.n) s = core_err(CT_ERR_OOM, "gguf writer: output too large");
    uint8_t *out = s == CT_OK ? calloc(1, b.n + (size_t)dsize + 1) : NULL;
    if (s == CT_OK && !out) s = core_err(CT_ERR_OOM, "gguf writer: out of memory for %llu bytes", (unsigned long long)(b.n + dsize));
    if (s == CT_OK) {
        memcpy(out, b.p, b.n);
        for (int64_t i = 0; i < w->n_t; i++)
            if (w->ts[i].size) memcpy(out + b.n + w->ts[i].offset, w->ts[i].data, w->ts[i].size);
        *data = out;
        *size = b.n + (size_t)dsize;
    }
    free(b.p);
    return s;
}

void gguf_writer_set_cancel(gguf_writer *w, volatile sig_atomic_t *flag)
{
    if (w) w->cancel = flag;
}

/* false with errno set; ECANCELED when the cancel flag was raised */
static bool write_body(gguf_writer *w, int fd, const wbuf *b)
{
    static const uint8_t zeros[256];
    if (!formats_write_all(fd, b->p, b->n)) return false;
    for (int64_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->ts[i];
        if (w->cancel && *w->cancel) {
            errno = ECANCELED;
            return false;
        }
        if (!formats_write_all(fd, t->data, t->size)) return false;
        uint64_t pos = t->offset + t->size, end = align_up(pos, w->alignment);
        while (pos < end) {
            size_t k = end - pos < sizeof zeros ? (size_t)(end - pos) : sizeof zeros;
            if (!formats_write_all(fd, zeros, k)) return false;
            pos += k;
        }
    }
    return true;
}

/* Atomic through formats_atomic_write: a failure never leaves a partial file
 * under path's name, and an existing file stays untouched until the rename. */
typedef struct body_ctx {
    gguf_writer *w;
    const wbuf *b;
} body_ctx;

static bool write_body_cb(int fd, void *ctx)
{
    body_ctx *c = ctx;
    return write_body(c->w, fd, c->b);
}

ct_status gguf_writer_write(gguf_writer *w, const char *path)
{
    if (!w || !path) return core_err(CT_ERR_INVALID_ARG, "gguf_writer_write: null argument");
    wbuf b = {0};
    uint64_t dsize;
    ct_status s = build_header(w, &b, &dsize);
    if (s == CT_OK) s = formats_atomic_write(path, write_body_cb, &(body_ctx){w, &b}, "gguf writer");
    free(b.p);
    return s;
}
