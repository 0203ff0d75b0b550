/* GGUF parsing: everything is validated here, once, so that the accessors
 * (gguf_access.c) can trust offsets and sizes. Every count read from the file
 * is bounded by the bytes left before anything is allocated for it. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/gguf_internal.h"

#define FMT_ERR(f, ...) ((void)(f), core_err(CT_ERR_FORMAT, "gguf '%s': " __VA_ARGS__))

static ct_status need(const gguf_cursor *c, size_t n, const char *what)
{
    if (n <= c->size - c->pos) return CT_OK;
    return core_err(CT_ERR_FORMAT, "gguf '%s': %s at offset %zu needs %zu bytes but only %zu remain (truncated file?)",
                    c->name, what, c->pos, n, c->size - c->pos);
}

static ct_status read_u32(gguf_cursor *c, const char *what, uint32_t *v)
{
    ct_status s = need(c, 4, what);
    if (s != CT_OK) return s;
    *v = gguf_rd32(c->p + c->pos);
    c->pos += 4;
    return CT_OK;
}

static ct_status read_u64(gguf_cursor *c, const char *what, uint64_t *v)
{
    ct_status s = need(c, 8, what);
    if (s != CT_OK) return s;
    *v = gguf_rd64(c->p + c->pos);
    c->pos += 8;
    return CT_OK;
}

/* A key or tensor name: copied and NUL-terminated; embedded NULs rejected
 * because they would make two different names compare equal. */
static ct_status read_name(gguf_cursor *c, const char *what, size_t max, char **out)
{
    size_t at = c->pos;
    uint64_t len;
    ct_status s = read_u64(c, what, &len);
    if (s != CT_OK) return s;
    if (len == 0 || len > max)
        return core_err(CT_ERR_FORMAT, "gguf '%s': %s at offset %zu has length %llu (must be 1..%zu)", c->name, what, at,
                        (unsigned long long)len, max);
    if (len > c->size - c->pos)
        return core_err(CT_ERR_FORMAT, "gguf '%s': %s at offset %zu has length %llu, past the end of the file (%zu bytes left)",
                        c->name, what, at, (unsigned long long)len, c->size - c->pos);
    const uint8_t *p = c->p + c->pos;
    if (memchr(p, 0, (size_t)len))
        return core_err(CT_ERR_FORMAT, "gguf '%s': %s at offset %zu contains a NUL byte", c->name, what, at);
    char *str = malloc((size_t)len + 1);
    if (!str) return core_err(CT_ERR_OOM, "gguf '%s': out of memory for %s", c->name, what);
    memcpy(str, p, (size_t)len);
    str[len] = 0;
    c->pos += (size_t)len;
    *out = str;
    return CT_OK;
}

/* Fills kv->val (which starts at the cursor) and moves past it. */
static ct_status parse_value(gguf_file *f, gguf_cursor *c, gguf_kv *kv, int64_t index)
{
    gguf_value *v = &kv->val;
    size_t start = c->pos;
    v->kv = index;
    ct_status s = gguf_skip_value(c, v->type, 0, kv->key);
    if (s != CT_OK) return s;
    v->ptr = f->base + start;
    v->size = c->pos - start;
    if (v->type == GGUF_TYPE_STRING) {
        v->n = gguf_rd64(v->ptr);
        v->ptr += 8;
        v->size -= 8;
    } else if (v->type == GGUF_TYPE_ARRAY) {
        v->elem = (gguf_type)gguf_rd32(v->ptr);
        v->n = gguf_rd64(v->ptr + 4);
        v->ptr += 12;
        v->size -= 12;
    } else {
        v->n = 1;
    }
    if (v->type != GGUF_TYPE_ARRAY || v->elem != GGUF_TYPE_STRING) return CT_OK;
    /* string arrays get an offset table for O(1) indexing (vocabularies); n is
     * bounded by the file size / 8, so the table is never larger than the file */
    kv->str_offs = malloc(v->n ? v->n * sizeof *kv->str_offs : 1);
    if (!kv->str_offs) return core_err(CT_ERR_OOM, "gguf '%s': out of memory indexing '%s'", f->name, kv->key);
    uint64_t off = (uint64_t)(v->ptr - f->base);
    for (uint64_t i = 0; i < v->n; i++) {
        kv->str_offs[i] = off;
        off += 8 + gguf_rd64(f->base + off);
    }
    return CT_OK;
}

static ct_status parse_kvs(gguf_file *f, gguf_cursor *c)
{
    size_t at = c->pos;
    uint64_t n;
    ct_status s = read_u64(c, "metadata kv count", &n);
    if (s != CT_OK) return s;
    /* smallest kv: 8 (key length) + 1 (key) + 4 (type) + 1 (u8 value) */
    if (n > (c->size - c->pos) / 14)
        return FMT_ERR(f, "metadata kv count %llu at offset %zu is impossible for the %zu bytes left", c->name,
                       (unsigned long long)n, at, c->size - c->pos);
    f->kvs = calloc(n ? n : 1, sizeof *f->kvs);
    if (!f->kvs) return core_err(CT_ERR_OOM, "gguf '%s': out of memory for %llu kvs", c->name, (unsigned long long)n);
    f->n_kv = 0;
    s = gguf_index_init(&f->kv_index, (int64_t)n);
    if (s != CT_OK) return s;
    for (uint64_t i = 0; i < n; i++) {
        gguf_kv *kv = &f->kvs[i];
        f->n_kv = (int64_t)i + 1; /* so close frees what this one allocated */
        kv->key_off = c->pos;
        s = read_name(c, "metadata key", GGUF_MAX_KEY, &kv->key);
        if (s != CT_OK) return s;
        if (!gguf_index_insert(&f->kv_index, kv->key, (int64_t)i))
            return FMT_ERR(f, "duplicate metadata key '%s' at offset %llu", c->name, kv->key,
                           (unsigned long long)kv->key_off);
        size_t tat = c->pos;
        uint32_t type;
        s = read_u32(c, kv->key, &type);
        if (s != CT_OK) return s;
        if (type >= GGUF_TYPE_COUNT)
            return FMT_ERR(f, "metadata key '%s': invalid value type %u at offset %zu", c->name, kv->key, type, tat);
        kv->val.type = (gguf_type)type;
        s = parse_value(f, c, kv, (int64_t)i);
        if (s != CT_OK) return s;
    }
    return CT_OK;
}

static ct_status read_alignment(gguf_file *f)
{
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = gguf_find_key(f, "general.alignment");
    if (i < 0) return CT_OK;
    const gguf_kv *kv = &f->kvs[i];
    if (kv->val.type != GGUF_TYPE_UINT32)
        return FMT_ERR(f, "general.alignment at offset %llu has type %s (must be u32)", f->name,
                       (unsigned long long)kv->key_off, gguf_type_name(kv->val.type));
    uint32_t a = gguf_rd32(kv->val.ptr);
    if (a == 0 || (a & (a - 1)))
        return FMT_ERR(f, "general.alignment = %u at offset %llu is not a power of two", f->name, a,
                       (unsigned long long)(kv->val.ptr - f->base));
    f->alignment = a;
    return CT_OK;
}

static ct_status parse_tensor_info(gguf_file *f, gguf_cursor *c, gguf_tensor *t, size_t *info_off)
{
    size_t at = c->pos;
    *info_off = at;
    char *name = NULL;
    ct_status s = read_name(c, "tensor name", GGUF_MAX_NAME - 1, &name);
    if (s != CT_OK) return s;
    t->name = name;
    uint32_t nd;
    size_t dat = c->pos;
    s = read_u32(c, name, &nd);
    if (s != CT_OK) return s;
    if (nd < 1 || nd > GGUF_MAX_DIMS)
        return FMT_ERR(f, "tensor '%s': n_dims = %u at offset %zu (must be 1..%d)", c->name, name, nd, dat, GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    int64_t numel = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        size_t eat = c->pos;
        uint64_t ne;
        s = read_u64(c, name, &ne);
        if (s != CT_OK) return s;
        if (ne == 0 || ne > (uint64_t)INT64_MAX)
            return FMT_ERR(f, "tensor '%s': ne[%u] = %lld at offset %zu (must be positive)", c->name, name, d, (long long)ne,
                           eat);
        if ((int64_t)ne > INT64_MAX / numel)
            return FMT_ERR(f, "tensor '%s': element count overflows at ne[%u] (offset %zu)", c->name, name, d, eat);
        numel *= (int64_t)ne;
        t->ne[d] = (int64_t)ne;
    }
    size_t tat = c->pos;
    s = read_u32(c, name, &t->ggml_type);
    if (s != CT_OK) return s;
    int64_t block;
    size_t bbytes;
    if (!gguf_ggml_block(t->ggml_type, &block, &bbytes))
        return FMT_ERR(f, "tensor '%s': invalid ggml type %u at offset %zu", c->name, name, t->ggml_type, tat);
    if (!gguf_ggml_to_dtype(t->ggml_type, &t->dtype)) t->dtype = CT_DTYPE_COUNT;
    if (t->ne[0] % block)
        return FMT_ERR(f, "tensor '%s': row length ne[0] = %lld is not a multiple of the %s block size %lld (offset %zu)",
                       c->name, name, (long long)t->ne[0], gguf_ggml_type_name(t->ggml_type), (long long)block, dat);
    uint64_t bytes = (uint64_t)(numel / block);
    if (bytes > SIZE_MAX / bbytes || bytes * bbytes > c->size)
        return FMT_ERR(f, "tensor '%s': %lld elements of %s (offset %zu) are larger than the whole file", c->name, name,
                       (long long)numel, gguf_ggml_type_name(t->ggml_type), at);
    t->size = (size_t)(bytes * bbytes);
    return read_u64(c, name, &t->offset);
}

typedef struct span {
    uint64_t start, end;
    int64_t i;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start ? 1 : 0;
}

/* Offsets aligned, data inside the file, no two tensors sharing bytes. */
static ct_status check_layout(gguf_file *f, const size_t *info_off)
{
    if (f->n_tensors == 0) return CT_OK;
    if (f->data_off > f->size)
        return FMT_ERR(f, "tensor data section starts at offset %llu, past the end of the %zu-byte file", f->name,
                       (unsigned long long)f->data_off, f->size);
    uint64_t avail = f->size - f->data_off;
    span *sp = malloc((size_t)f->n_tensors * sizeof *sp);
    if (!sp) return core_err(CT_ERR_OOM, "gguf '%s': out of memory", f->name);
    ct_status s = CT_OK;
    for (int64_t i = 0; i < f->n_tensors && s == CT_OK; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (t->offset % f->alignment)
            s = FMT_ERR(f, "tensor '%s' (info at offset %zu): data offset %llu is not a multiple of the alignment %u",
                        f->name, t->name, info_off[i], (unsigned long long)t->offset, f->alignment);
        else if (t->offset > avail || t->size > avail - t->offset)
            s = FMT_ERR(f, "tensor '%s' (info at offset %zu): data [%llu, +%zu) at file offset %llu runs past the end of the file (%zu bytes)",
                        f->name, t->name, info_off[i], (unsigned long long)t->offset, t->size,
                        (unsigned long long)(f->data_off + t->offset), f->size);
        else
            t->data = f->base + f->data_off + t->offset;
        sp[i] = (span){t->offset, t->offset + t->size, i};
    }
    if (s == CT_OK) {
        qsort(sp, (size_t)f->n_tensors, sizeof *sp, cmp_span);
        for (int64_t k = 1; k < f->n_tensors && s == CT_OK; k++)
            if (sp[k].start < sp[k - 1].end)
                s = FMT_ERR(f, "tensor '%s' (data offset %llu, info at offset %zu) overlaps tensor '%s' (data offset %llu)",
                            f->name, f->tensors[sp[k].i].name, (unsigned long long)sp[k].start, info_off[sp[k].i],
                            f->tensors[sp[k - 1].i].name, (unsigned long long)sp[k - 1].start);
    }
    free(sp);
    return s;
}

static ct_status parse_tensors(gguf_file *f, gguf_cursor *c, uint64_t n)
{
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    size_t *info_off = malloc((n ? n : 1) * sizeof *info_off);
    ct_status s = CT_OK;
    if (!f->tensors || !info_off) s = core_err(CT_ERR_OOM, "gguf '%s': out of memory for %llu tensors", c->name, (unsigned long long)n);
    if (s == CT_OK) s = gguf_index_init(&f->tensor_index, (int64_t)n);
    for (uint64_t i = 0; i < n && s == CT_OK; i++) {
        f->n_tensors = (int64_t)i + 1;
        s = parse_tensor_info(f, c, &f->tensors[i], &info_off[i]);
        if (s == CT_OK && !gguf_index_insert(&f->tensor_index, f->tensors[i].name, (int64_t)i))
            s = FMT_ERR(f, "duplicate tensor name '%s' at offset %zu", c->name, f->tensors[i].name, info_off[i]);
    }
    if (s == CT_OK) {
        uint64_t a = f->alignment;
        f->data_off = (c->pos + a - 1) / a * a;
        s = check_layout(f, info_off);
    }
    free(info_off);
    return s;
}

static ct_status parse(gguf_file *f)
{
    gguf_cursor c = {f->base, f->size, 0, f->name};
    if (f->size < 4 || memcmp(f->base, GGUF_MAGIC, 4))
        return FMT_ERR(f, "not a GGUF file (bad magic at offset 0)", f->name);
    c.pos = 4;
    ct_status s = read_u32(&c, "version", &f->version);
    if (s != CT_OK) return s;
    if (f->version == 1)
        return FMT_ERR(f, "GGUF version 1 (offset 4) is not supported (32-bit counts); convert it with a current tool",
                       f->name);
    if (f->version == 0x02000000u || f->version == 0x03000000u)
        return FMT_ERR(f, "big-endian GGUF (version field at offset 4) is not supported", f->name);
    if (f->version != 2 && f->version != 3)
        return FMT_ERR(f, "unsupported GGUF version %u at offset 4 (expected 2 or 3)", f->name, f->version);
    size_t at = c.pos;
    uint64_t n_tensors;
    s = read_u64(&c, "tensor count", &n_tensors);
    if (s != CT_OK) return s;
    /* smallest tensor info: 8 + 1 (name) + 4 (n_dims) + 8 (ne) + 4 (type) + 8 (offset) */
    if (n_tensors > (c.size - c.pos) / 33)
        return FMT_ERR(f, "tensor count %llu at offset %zu is impossible for the %zu bytes left", f->name,
                       (unsigned long long)n_tensors, at, c.size - c.pos);
    s = parse_kvs(f, &c);
    if (s == CT_OK) s = read_alignment(f);
    if (s == CT_OK) s = parse_tensors(f, &c, n_tensors);
    return s;
}

static ct_status open_map(gguf_map *m, const char *name, gguf_file **out)
{
    gguf_file *f = calloc(1, sizeof *f);
    char *nm = strdup(name ? name : "<memory>");
    if (!f || !nm) {
        free(f);
        free(nm);
        gguf_map_release(m);
        return core_err(CT_ERR_OOM, "gguf: out of memory opening '%s'", name ? name : "<memory>");
    }
    f->name = nm;
    f->map = m;
    f->base = m->addr;
    f->size = m->len;
    ct_status s = parse(f);
    if (s != CT_OK) {
        gguf_close(f);
        return s;
    }
    *out = f;
    return CT_OK;
}

ct_status gguf_open_memory(const void *data, size_t size, const char *name, gguf_file **out)
{
    if (!out || (!data && size)) return core_err(CT_ERR_INVALID_ARG, "gguf_open_memory: null argument");
    *out = NULL;
    gguf_map *m = calloc(1, sizeof *m);
    if (!m) return core_err(CT_ERR_OOM, "gguf: out of memory");
    atomic_init(&m->ref, 1);
    m->addr = (void *)data;
    m->len = size;
    return open_map(m, name, out);
}

ct_status gguf_open(const char *path, gguf_file **out)
{
    if (!path || !out) return core_err(CT_ERR_INVALID_ARG, "gguf_open: null argument");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return core_err(CT_ERR_IO, "gguf '%s': cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        close(fd);
        return core_err(CT_ERR_IO, "gguf '%s': not a regular file%s%s", path, e ? ": " : "", e ? strerror(e) : "");
    }
    if (st.st_size < 8) {
        close(fd);
        return core_err(CT_ERR_FORMAT, "gguf '%s': file of %lld bytes is too small for a GGUF header (offset 0)", path,
                        (long long)st.st_size);
    }
    /* Private writable mapping: tensors built on it may be written by callers
     * (copy-on-write, never reaching the file); NORESERVE keeps a big model
     * from being charged against the commit limit up front. */
    void *addr = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
    int e = errno;
    close(fd);
    if (addr == MAP_FAILED) return core_err(CT_ERR_IO, "gguf '%s': mmap of %lld bytes failed: %s", path, (long long)st.st_size, strerror(e));
    gguf_map *m = calloc(1, sizeof *m);
    if (!m) {
        munmap(addr, (size_t)st.st_size);
        return core_err(CT_ERR_OOM, "gguf: out of memory");
    }
    atomic_init(&m->ref, 1);
    m->addr = addr;
    m->len = (size_t)st.st_size;
    m->is_mmap = true;
    return open_map(m, path, out);
}

void gguf_close(gguf_file *f)
{
    if (!f) return;
    for (int64_t i = 0; i < f->n_kv; i++) {
        free(f->kvs[i].key);
        free(f->kvs[i].str_offs);
    }
    free(f->kvs);
    for (int64_t i = 0; i < f->n_tensors; i++) free((char *)f->tensors[i].name);
    free(f->tensors);
    gguf_index_free(&f->kv_index);
    gguf_index_free(&f->tensor_index);
    gguf_map_release(f->map);
    free(f->name);
    free(f);
}
