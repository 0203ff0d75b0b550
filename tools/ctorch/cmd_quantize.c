/* ctorch quantize IN.gguf OUT.gguf TYPE [-t THREADS] [--allow-requantize] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "formats/quantize.h"
#include "opts.h"
#include "progress.h"

static void on_progress(void *ctx, int64_t done, int64_t total, const char *tensor)
{
    progress_update(ctx, done, total, tensor);
}

int cmd_quantize(int argc, char **argv)
{
    const char *pos[3] = {0};
    int npos = 0;
    quantize_options opt = {.n_threads = 2};
    const cli_opt opts[] = {
        {"-t|--threads", "N", CLI_INT, &opt.n_threads, 1, CLI_NOMAX, NULL, "threads (default 2; capped at the hardware threads)"},
        {"--allow-requantize", NULL, CLI_FLAG, &opt.allow_requantize, 0, 0, NULL, "accept an already quantized input"},
    };
    char notes[512];
    snprintf(notes, sizeof notes, "TYPE: %s\n", quantize_mix_names());
    const cli_spec spec = {"quantize", "quantize [options] IN.gguf OUT.gguf TYPE", notes, opts, CLI_N(opts), 3};
    int prc = cli_parse(&spec, argc, argv, pos, &npos);
    if (prc >= 0) return prc;
    static const char *const names[] = {"IN.gguf", "OUT.gguf", "TYPE"};
    if (npos != 3) return cli_usage_error("quantize", "missing %s", names[npos]);
    if (!quantize_find_mix(pos[2]))
        return cli_usage_error("quantize", "unknown type '%s' (one of: %s)", pos[2], quantize_mix_names());
    if (!cli_check_model_path("quantize", "input", pos[0])) return 1;
    opt.n_threads = cli_cap_threads("quantize", opt.n_threads);
    progress bar;
    progress_begin(&bar, "quantize");
    opt.progress = on_progress;
    opt.progress_ctx = &bar;
    cli_catch_sigint(); /* stop cleanly: the library then removes its temporary file */
    opt.stop = &cli_interrupted;
    quantize_report rep;
    ct_status s = quantize_file(pos[0], pos[1], pos[2], &opt, &rep);
    if (s != CT_OK) {
        progress_abort(&bar);
        const char *why = cli_interrupted ? "interrupted; nothing was written" : ct_last_error();
        fprintf(stderr, "ctorch quantize: %s\n", why);
        return cli_interrupted ? CLI_EXIT_INTERRUPTED : 1;
    }
    char summary[200];
    snprintf(summary, sizeof summary, "%d tensors (%d converted, %d fallbacks), %.1f MB -> %.1f MB", rep.n_tensors,
             rep.n_quantized, rep.n_fallback, rep.bytes_in / 1e6, rep.bytes_out / 1e6);
    progress_end(&bar, summary);
    printf("%s\n", pos[1]);
    return 0;
}
