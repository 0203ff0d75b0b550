/* Residency requested by the caller: copies made ahead of the ops that need them. */
#include "exec/exec.h"

ct_status ct_tensor_prefetch(const ct_tensor *t, const char *device)
{
    ct_status s = tensor_check("ct_tensor_prefetch", "tensor", t);
    if (s != CT_OK) return s;
    s = exec_ready();
    if (s != CT_OK) return s;
    ct_device *d = exec_find_device(device);
    if (!d) return core_err(CT_ERR_NOT_FOUND, "ct_tensor_prefetch: no device '%s'", device ? device : "(null)");
    return storage_make_valid(t->st, d, NULL);
}
