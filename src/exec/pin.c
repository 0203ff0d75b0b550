/* The pin table: host ranges page-locked for the devices (ct_host_pin), and through
 * which device each backend pinned them, so ct_host_unpin and the release of a device
 * undo exactly what was done. Every function here runs under the registry's lock
 * (registry.c), which also guards the device table it reads. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"

typedef struct pin_entry {
    char *ptr;
    size_t bytes;
    /* One device per backend with a host_pin entry (a backend pins for all its devices);
     * NULL once that device was released (its backend undid the pinning then). */
    ct_device *by[EXEC_MAX_BACKENDS];
} pin_entry;

static pin_entry *g_pins;
static int g_n_pins, g_cap_pins;

static int find(const void *ptr)
{
    for (int i = 0; i < g_n_pins; i++)
        if (g_pins[i].ptr == ptr) return i;
    return -1;
}

static int find_overlap(const char *p, size_t bytes)
{
    for (int i = 0; i < g_n_pins; i++)
        if (p < g_pins[i].ptr + g_pins[i].bytes && g_pins[i].ptr < p + bytes) return i;
    return -1;
}

static void undo(pin_entry *e)
{
    for (int k = 0; k < EXEC_MAX_BACKENDS; k++) {
        ct_device *d = e->by[k];
        if (d && d->ops->host_unpin) d->ops->host_unpin(d, e->ptr);
        e->by[k] = NULL;
    }
}

/* Pins e's range once per backend; on a failure what was pinned is undone. */
static ct_status pin_on_devices(pin_entry *e, ct_device *const *devs, int n_devs)
{
    int n_by = 0;
    for (int i = 0; i < n_devs; i++) {
        ct_device *d = devs[i];
        if (!d->ops->host_pin || device_is_lost(d)) continue;
        bool done = false;
        for (int k = 0; k < n_by && !done; k++) done = e->by[k]->ops == d->ops;
        if (done || n_by == EXEC_MAX_BACKENDS) continue;
        ct_status s = d->ops->host_pin(d, e->ptr, e->bytes);
        if (s != CT_OK) {
            undo(e);
            return s;
        }
        e->by[n_by++] = d;
    }
    return CT_OK;
}

static ct_status grow(void)
{
    if (g_n_pins < g_cap_pins) return CT_OK;
    int cap = g_cap_pins ? 2 * g_cap_pins : 8;
    pin_entry *p = realloc(g_pins, sizeof *p * (size_t)cap);
    if (!p) return core_err(CT_ERR_OOM, "ct_host_pin: out of memory for the pin table");
    g_pins = p;
    g_cap_pins = cap;
    return CT_OK;
}

ct_status pin_add(void *ptr, size_t bytes, ct_device *const *devs, int n_devs)
{
    int o = find_overlap(ptr, bytes);
    if (o >= 0)
        return core_err(CT_ERR_INVALID_ARG,
                        "ct_host_pin: [%p, +%zu bytes) overlaps [%p, +%zu bytes), pinned already (unpin it first)",
                        ptr, bytes, (void *)g_pins[o].ptr, g_pins[o].bytes);
    ct_status s = grow();
    if (s != CT_OK) return s;
    pin_entry *e = &g_pins[g_n_pins];
    memset(e, 0, sizeof *e);
    e->ptr = ptr, e->bytes = bytes;
    s = pin_on_devices(e, devs, n_devs);
    if (s != CT_OK) return s;
    g_n_pins++;
    return CT_OK;
}

bool pin_remove(void *ptr)
{
    int i = find(ptr);
    if (i < 0) return false;
    undo(&g_pins[i]);
    g_pins[i] = g_pins[--g_n_pins];
    if (!g_n_pins) { /* nothing pinned: no table left behind */
        free(g_pins);
        g_pins = NULL;
        g_cap_pins = 0;
    }
    return true;
}

void pin_forget_device(ct_device *dev)
{
    for (int i = 0; i < g_n_pins; i++)
        for (int k = 0; k < EXEC_MAX_BACKENDS; k++)
            if (g_pins[i].by[k] == dev) {
                if (dev->ops->host_unpin) dev->ops->host_unpin(dev, g_pins[i].ptr);
                g_pins[i].by[k] = NULL;
            }
}

int pin_count(size_t *bytes)
{
    size_t b = 0;
    for (int i = 0; i < g_n_pins; i++) b += g_pins[i].bytes;
    if (bytes) *bytes = b;
    return g_n_pins;
}
