/* Shared between the GGUF reader, accessors and writer. Not for other modules. */
#ifndef CT_FORMATS_GGUF_INTERNAL_H
#define CT_FORMATS_GGUF_INTERNAL_H

#include <stdatomic.h>

#include "core/tensor.h"
#include "formats/gguf.h"

/* Nesting depth of arrays of arrays we accept: deeper input is hostile (and
 * would recurse on the stack). */
#define GGUF_MAX_NESTING 8
/* Spec limits: keys up to 65535 bytes; ggml names are < 64 bytes with the NUL. */
#define GGUF_MAX_KEY 65535
#define GGUF_MAX_NAME 64

/* The bytes a file was parsed from; reference counted so tensors can outlive gguf_close. */
typedef struct gguf_map {
    atomic_int ref;
    void *addr;
    size_t len;
    bool is_mmap; /* else borrowed from the caller */
} gguf_map;

void gguf_map_release(gguf_map *m);

/* Open-addressing index from a NUL-terminated name to an element index. */
typedef struct gguf_index {
    const char **names; /* slot -> name (NULL: empty) */
    int64_t *idx;       /* slot -> element index */
    uint64_t mask;
} gguf_index;

ct_status gguf_index_init(gguf_index *ix, int64_t n);
void gguf_index_free(gguf_index *ix);
/* false when the name is already present. */
bool gguf_index_insert(gguf_index *ix, const char *name, int64_t i);
int64_t gguf_index_find(const gguf_index *ix, const char *name);

typedef struct gguf_kv {
    char *key;        /* NUL-terminated copy */
    uint64_t key_off; /* file offset of the key, for messages */
    gguf_value val;
    uint64_t *str_offs; /* top-level string arrays: file offset of each element's length field */
} gguf_kv;

struct gguf_file {
    char *name;
    gguf_map *map;
    const uint8_t *base;
    size_t size;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_off;
    int64_t n_kv;
    gguf_kv *kvs;
    int64_t n_tensors;
    gguf_tensor *tensors;
    gguf_index kv_index, tensor_index;
};

/* Bounds-checked little-endian cursor over a byte range. */
typedef struct gguf_cursor {
    const uint8_t *p;
    size_t size;
    size_t pos;
    const char *name; /* file name for messages */
} gguf_cursor;

/* Checks that the value of `type` starting at the cursor is well formed and
 * moves past it. `what` names the field for messages. */
ct_status gguf_skip_value(gguf_cursor *c, gguf_type type, int depth, const char *what);

/* Block size (elements) and bytes per block of a ggml type; false for unknown ids. */
bool gguf_ggml_block(uint32_t ggml_type, int64_t *block, size_t *bytes);

static inline uint32_t gguf_rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t gguf_rd64(const uint8_t *p) { return (uint64_t)gguf_rd32(p) | (uint64_t)gguf_rd32(p + 4) << 32; }

#endif
