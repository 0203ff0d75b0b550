/* The op record's helpers that backends need: op names and operand addresses.
 * They live in core, beneath the backends, so kernels never reach up into exec. */
#include <strings.h>

#include "core/backend.h"

static const char *g_op_names[] = {
#define CT_OP_STR(name, str) str,
    CT_OP_LIST(CT_OP_STR)
#undef CT_OP_STR
};

const char *op_kind_name(ct_op_kind k) { return (unsigned)k < CT_OP_COUNT ? g_op_names[k] : "unknown"; }

bool op_kind_from_name(const char *name, ct_op_kind *k)
{
    for (int i = 0; i < CT_OP_COUNT; i++)
        if (!strcasecmp(name, g_op_names[i])) {
            *k = (ct_op_kind)i;
            return true;
        }
    return false;
}

void *op_data(const ct_tensor *t, const ct_device *dev)
{
    ct_storage_copy *c = storage_find(t->st, dev);
    if (!c || !c->buf.ptr) return NULL;
    return (char *)c->buf.ptr + tensor_byte_offset(t);
}
