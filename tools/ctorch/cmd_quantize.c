/* ctorch quantize IN.gguf OUT.gguf TYPE [-t THREADS] [--allow-requantize] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "formats/quantize.h"
#include "progress.h"

static void on_progress(void *ctx, int64_t done, int64_t total, const char *tensor)
{
    progress_update(ctx, done, total, tensor);
}

static int usage(void)
{
    fprintf(stderr, "usage: ctorch quantize IN.gguf OUT.gguf TYPE [-t THREADS] [--allow-requantize]\n  TYPE: %s\n",
            quantize_mix_names());
    return 2;
}

int cmd_quantize(int argc, char **argv)
{
    const char *pos[3] = {0};
    int npos = 0;
    quantize_options opt = {.n_threads = 2};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) opt.n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--allow-requantize")) opt.allow_requantize = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return usage();
        else if (argv[i][0] == '-' || npos == 3) return usage();
        else pos[npos++] = argv[i];
    }
    if (npos != 3) return usage();
    if (!quantize_find_mix(pos[2])) {
        fprintf(stderr, "ctorch quantize: unknown type '%s' (one of: %s)\n", pos[2], quantize_mix_names());
        return 2;
    }
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
