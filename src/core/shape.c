/* Shape arithmetic shared by every layer. */
#include <stdio.h>
#include <string.h>

#include "core/tensor.h"

int64_t shape_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

void shape_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        stride[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
}

bool shape_equal(int na, const int64_t *a, int nb, const int64_t *b)
{
    return na == nb && (na == 0 || memcmp(a, b, sizeof(int64_t) * (size_t)na) == 0);
}

bool shape_norm_dim(int *dim, int ndim)
{
    int d = *dim < 0 ? *dim + ndim : *dim;
    if (d < 0 || d >= ndim) return false;
    *dim = d;
    return true;
}

const char *shape_str(int ndim, const int64_t *shape, char *buf, size_t len)
{
    size_t pos = 0;
    pos += (size_t)snprintf(buf + pos, len - pos, "[");
    for (int i = 0; i < ndim && pos < len; i++)
        pos += (size_t)snprintf(buf + pos, len - pos, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (pos < len) snprintf(buf + pos, len - pos, "]");
    return buf;
}

ct_status shape_broadcast(const char *op, int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                          int64_t *out)
{
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[96], sb[96];
            return core_err(CT_ERR_SHAPE, "%s: shapes %s and %s do not broadcast (dim %d: %lld vs %lld)", op,
                            shape_str(na, a, sa, sizeof sa), shape_str(nb, b, sb, sizeof sb), i,
                            (long long)da, (long long)db);
        }
        out[i] = da == 1 ? db : da;
    }
    *nout = n;
    return CT_OK;
}
