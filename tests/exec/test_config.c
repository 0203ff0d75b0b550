/* Settings from the environment: read in one place (core/config.c), refused with a
 * message naming the variable when a value does not parse, re-read by ct_exec_reinit,
 * and a failed re-read keeps the settings in force. */
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/cpuid.h"
#include "exec_util.h"

/* Runs first, in a fresh process: the first initialization meets a bad setting. */
/* The platform chain of this machine (cpu here, cuda:0,cpu on a GPU machine). */
static int g_default_chain;

static void test_first_init_refused(void)
{
    setenv("CTORCH_DEVICES", "bogus", 1);
    CHECK_STATUS(ct_exec_init(), CT_ERR_NOT_FOUND);
    CHECK_MSG(strstr(ct_last_error(), "CTORCH_DEVICES='bogus'") != NULL, "message: %s", ct_last_error());
    /* every op reports it instead of running on settings nobody asked for */
    ct_tensor *t = NULL;
    int64_t shape[1] = {4};
    CHECK_STATUS(ct_ones(1, shape, CT_F32, &t), CT_ERR_NOT_FOUND);
    CHECK(t == NULL);
    CHECK(ct_chain_length() == 0);
    /* an explicit chain fixes it (ctorch -d cpu under a bad CTORCH_DEVICES) */
    CHECK_OK(ct_exec_set_devices("cpu"));
    CHECK_OK(ct_exec_init());
    CHECK_OK(ct_ones(1, shape, CT_F32, &t));
    ct_tensor_free(t);
    CHECK_STATUS(ct_exec_set_devices(NULL), CT_ERR_NOT_FOUND); /* back to the environment's: bogus again */
    CHECK(ct_chain_length() == 1);                             /* the chain in force stays */
    unsetenv("CTORCH_DEVICES");
    CHECK_OK(ct_exec_reinit());
    CHECK_OK(ct_exec_set_devices(NULL)); /* the override is dropped only when that works */
    g_default_chain = ct_chain_length();
    ct_device_info last;
    CHECK(g_default_chain >= 1 && ct_chain_get(g_default_chain - 1, &last) == CT_OK && !strcmp(last.name, "cpu"));
}

typedef struct bad_case {
    const char *var, *value;
    ct_status want;
} bad_case;

static void test_bad_values(void)
{
    static const bad_case cases[] = {
        {"CTORCH_DEVICES", "bogus", CT_ERR_NOT_FOUND},
        {"CTORCH_DISABLE_GPU", "maybe", CT_ERR_INVALID_ARG},
        {"CTORCH_STRICT", "2", CT_ERR_INVALID_ARG},
        {"CTORCH_STATS", "yes please", CT_ERR_INVALID_ARG},
        {"CTORCH_SYNC", "x", CT_ERR_INVALID_ARG},
        {"CTORCH_TRACE", "/nonexistent-dir/x/trace.json", CT_ERR_IO},
        {"CTORCH_TRACE", "trace.txt", CT_ERR_INVALID_ARG},
        {"CTORCH_FAULT", "cpu:add", CT_ERR_INVALID_ARG},
        {"CTORCH_SMALL_BYTES", "64k", CT_ERR_INVALID_ARG},
        {"CTORCH_SMALL_BYTES", "-1", CT_ERR_INVALID_ARG},
        {"CTORCH_HOST_CACHE_MB", "lots", CT_ERR_INVALID_ARG},
        {"CTORCH_THREADS", "0", CT_ERR_INVALID_ARG},
        {"CTORCH_THREADS", "99999", CT_ERR_INVALID_ARG},
        {"CTORCH_LOG", "loud", CT_ERR_INVALID_ARG},
        {"CTORCH_REPACK", "sometimes", CT_ERR_INVALID_ARG},
        {"CTORCH_AMX", "fast", CT_ERR_INVALID_ARG},
        {"CTORCH_SIMD", "bogus", CT_ERR_INVALID_ARG},
        {"CTORCH_SIMD", "avx1024", CT_ERR_INVALID_ARG},
        {"CTORCH_PREFETCH", "l3", CT_ERR_INVALID_ARG},
        {"CTORCH_PIPELINE", "sometimes", CT_ERR_INVALID_ARG},
        {"CTORCH_BPE_PRE", "this name is far longer than any pre-tokenizer name could be, so it is refused", CT_ERR_INVALID_ARG},
    };
    /* settings in force before each bad one */
    setenv("CTORCH_SMALL_BYTES", "8", 1);
    CHECK_OK(ct_exec_reinit());
    CHECK(ct_exec_small_bytes() == 8);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        setenv(c->var, c->value, 1);
        ct_status s = ct_exec_reinit();
        CHECK_MSG(s == c->want, "%s=%s: %s, want %s", c->var, c->value, ct_status_name(s), ct_status_name(c->want));
        CHECK_MSG(strstr(ct_last_error(), c->var) != NULL, "%s=%s: message does not name it: %s", c->var, c->value,
                  ct_last_error());
        unsetenv(c->var);
        if (!strcmp(c->var, "CTORCH_SMALL_BYTES")) setenv("CTORCH_SMALL_BYTES", "8", 1);
        /* the settings in force stay, and ops still run */
        CHECK_MSG(ct_exec_small_bytes() == 8 && ct_exec_init() == CT_OK && ct_chain_length() == g_default_chain,
                  "%s=%s changed the settings in force", c->var, c->value);
    }
    unsetenv("CTORCH_SMALL_BYTES");
    CHECK_OK(ct_exec_reinit());
    CHECK(ct_exec_small_bytes() == CONFIG_DEFAULT_SMALL_BYTES);
}

static void test_values_reach_their_readers(void)
{
    setenv("CTORCH_LOG", "error", 1);
    setenv("CTORCH_REPACK", "0", 1);
    setenv("CTORCH_AMX", "0", 1);
    setenv("CTORCH_HOST_CACHE_MB", "3", 1);
    setenv("CTORCH_STRICT", "on", 1);
    setenv("CTORCH_STATS", "true", 1);
    setenv("CTORCH_SIMD", "AVX2", 1);
    setenv("CTORCH_BPE_PRE", "gpt2", 1);
    setenv("CTORCH_PREFETCH", "L2", 1);
    setenv("CTORCH_PIPELINE", "off", 1);
    CHECK_OK(ct_exec_reinit());
    CHECK(config_current()->pipeline == 0);
    setenv("CTORCH_PIPELINE", "AUTO", 1);
    CHECK_OK(ct_exec_reinit());
    CHECK(config_current()->pipeline == -1);
    setenv("CTORCH_PIPELINE", "yes", 1);
    CHECK(core_prefetch_l2());
    setenv("CTORCH_PREFETCH", "l1", 1);
    CHECK_OK(ct_exec_reinit());
    CHECK(!core_prefetch_l2());
    const core_config *c = config_current();
    CHECK(c->log_level == CT_LOG_ERROR && !c->repack && c->host_cache_bytes == (size_t)3 << 20);
    CHECK(!c->amx && !cpu_amx_usable(CPU_AMX_INT8) && !cpu_amx_usable(CPU_AMX_BF16));
    CHECK(core_simd_cap_env() == CORE_SIMD_CAP_AVX2 && !strcmp(c->bpe_pre, "gpt2"));
    CHECK(!core_log_enabled(CT_LOG_WARN) && core_log_enabled(CT_LOG_ERROR));
    CHECK(ct_exec_strict() && ct_exec_stats_requested() && c->pipeline == 1);
    /* empty means the default */
    setenv("CTORCH_LOG", "", 1);
    unsetenv("CTORCH_REPACK");
    unsetenv("CTORCH_AMX");
    unsetenv("CTORCH_HOST_CACHE_MB");
    setenv("CTORCH_STRICT", "off", 1);
    unsetenv("CTORCH_STATS");
    setenv("CTORCH_SIMD", "", 1);
    unsetenv("CTORCH_BPE_PRE");
    unsetenv("CTORCH_PREFETCH");
    setenv("CTORCH_PIPELINE", "", 1);
    CHECK_OK(ct_exec_reinit());
    CHECK(core_prefetch_l2() == cpu_is_intel()); /* unset: by the vendor */
    c = config_current();
    CHECK(c->pipeline == -1);
    unsetenv("CTORCH_PIPELINE");
    CHECK(c->log_level == CT_LOG_WARN && c->repack && c->amx && c->host_cache_bytes == (size_t)256 << 20);
    CHECK(core_simd_cap_env() == CORE_SIMD_CAP_AVX512 && !c->bpe_pre[0]);
    unsetenv("CTORCH_SIMD");
    CHECK(core_log_enabled(CT_LOG_WARN) && !ct_exec_strict() && !ct_exec_stats_requested());
    unsetenv("CTORCH_LOG");
    unsetenv("CTORCH_STRICT");
}

/* The kernel cache's folder: CTORCH_CACHE_DIR, else $XDG_CACHE_HOME/ctorch, else
 * $HOME/.cache/ctorch, else none; a path too long for the buffer means no disk cache
 * rather than a cut one. */
static void test_cache_dir(void)
{
    const char *home = getenv("HOME"), *xdg = getenv("XDG_CACHE_HOME"), *dir = getenv("CTORCH_CACHE_DIR");
    char *home_was = home ? strdup(home) : NULL, *xdg_was = xdg ? strdup(xdg) : NULL, *dir_was = dir ? strdup(dir) : NULL;
    unsetenv("CTORCH_CACHE_DIR");
    setenv("XDG_CACHE_HOME", "/tmp/xdg-test", 1);
    CHECK_OK(ct_exec_reinit());
    CHECK_MSG(!strcmp(config_current()->cache_dir, "/tmp/xdg-test/ctorch"), "%s", config_current()->cache_dir);
    setenv("XDG_CACHE_HOME", "", 1); /* empty: as if unset */
    setenv("HOME", "/tmp/home-test", 1);
    setenv("CTORCH_LOG", "warning", 1);
    CHECK_OK(ct_exec_reinit());
    CHECK_MSG(!strcmp(config_current()->cache_dir, "/tmp/home-test/.cache/ctorch"), "%s", config_current()->cache_dir);
    CHECK(config_current()->log_level == CT_LOG_WARN);
    unsetenv("CTORCH_LOG");
    char longp[1024];
    memset(longp, 'a', sizeof longp - 1);
    longp[0] = '/', longp[sizeof longp - 1] = 0;
    setenv("HOME", longp, 1);
    CHECK_OK(ct_exec_reinit());
    CHECK(config_current()->cache_dir[0] == 0);
    unsetenv("HOME");
    CHECK_OK(ct_exec_reinit());
    CHECK(config_current()->cache_dir[0] == 0);
    if (home_was) setenv("HOME", home_was, 1);
    if (xdg_was) setenv("XDG_CACHE_HOME", xdg_was, 1);
    else unsetenv("XDG_CACHE_HOME");
    if (dir_was) setenv("CTORCH_CACHE_DIR", dir_was, 1);
    free(home_was), free(xdg_was), free(dir_was);
    CHECK_OK(ct_exec_reinit());
}

/* A trace file survives a re-initialization with the same setting (not truncated). */
static void test_trace_kept_across_reinit(void)
{
    const char *dir = getenv("CTORCH_TEST_TMP");
    char path[512];
    snprintf(path, sizeof path, "%s/test_config_trace.json", dir ? dir : ".");
    setenv("CTORCH_TRACE", path, 1);
    CHECK_OK(ct_exec_reinit());
    ct_tensor *t = NULL;
    int64_t shape[1] = {4};
    CHECK_OK(ct_ones(1, shape, CT_F32, &t));
    ct_tensor_free(t);
    CHECK_OK(ct_exec_reinit());
    unsetenv("CTORCH_TRACE");
    CHECK_OK(ct_exec_reinit()); /* closes it */
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (f) {
        char buf[4096] = "";
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
        CHECK_MSG(strstr(buf, "\"fill\"") != NULL, "trace lost the op: %s", buf);
    }
    remove(path);
}

int main(void)
{
    RUN(test_first_init_refused);
    RUN(test_bad_values);
    RUN(test_values_reach_their_readers);
    RUN(test_trace_kept_across_reinit);
    RUN(test_cache_dir);
    return th_finish();
}
