/* The architecture table. Everything the forward pass does differently per
 * architecture is a field here; the loader reads "<arch>.<key>" metadata. */
#include <string.h>

#include "llm/model.h"

static const llm_arch g_arches[] = {
    {
        .name = "llama",
        .rope_mode = CT_ROPE_NORMAL, /* GGUF stores llama q/k rows in the adjacent-pair layout */
        .act = LLM_ACT_SWIGLU,
        .default_rms_eps = 1e-5,
    },
    {
        .name = "gemma3",
        .rope_mode = CT_ROPE_NEOX,
        .act = LLM_ACT_GEGLU,
        .qk_norm = true,
        .post_norms = true,
        .embd_scale = true,
        .swa_period = 6,            /* 5 sliding-window layers, then 1 global */
        .swa_rope_base = 10000.0,   /* local layers keep the short-range base */
        .default_rms_eps = 1e-6,
    },
};

const llm_arch *llm_arch_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof g_arches / sizeof g_arches[0]; i++)
        if (strcmp(g_arches[i].name, name) == 0) return &g_arches[i];
    return NULL;
}

const char *llm_arch_list(void)
{
    return "llama, gemma3";
}
