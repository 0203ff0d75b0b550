/* ctorch tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos] [--parse-special]
 * Prints the token ids, space-separated, on one line. Only the GGUF metadata
 * is read (no weights are loaded). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "formats/gguf.h"
#include "llm/tokenizer.h"
#include "opts.h"

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool no_bos = false, parse_special = false, escape = false;
    const cli_opt opts[] = {
        {"-m|--model", "FILE", CLI_STRING, &model, 0, 0, NULL, "the GGUF model (only its vocabulary is read)"},
        {"-p|--prompt", "TEXT", CLI_STRING, &prompt, 0, 0, NULL, "the text"},
        {"-f|--file", "FILE", CLI_STRING, &file, 0, 0, NULL, "read the text from a file"},
        {"-e|--escape", NULL, CLI_FLAG, &escape, 0, 0, NULL, "process escapes in the text: \\n \\t \\xNN ..."},
        {"--no-bos", NULL, CLI_FLAG, &no_bos, 0, 0, NULL, "no BOS/EOS, even when the model adds them"},
        {"--parse-special", NULL, CLI_FLAG, &parse_special, 0, 0, NULL, "text like <|im_end|> becomes that control token"},
    };
    const cli_spec spec = {"tokenize", "tokenize -m MODEL.gguf (-p TEXT | -f FILE) [options]", NULL, opts, CLI_N(opts), 0};
    int prc = cli_parse(&spec, argc, argv, NULL, NULL);
    if (prc >= 0) return prc;
    if (prompt && file) return cli_usage_error("tokenize", "-p and -f conflict: give the text one way");
    if (!model) return cli_usage_error("tokenize", "no model given: -m MODEL.gguf is required");
    if (!prompt && !file) return cli_usage_error("tokenize", "no text: give -p TEXT or -f FILE");
    if (!cli_check_model_path("tokenize", "model", model)) return 1;
    bool add_special = !no_bos;

    size_t len = 0;
    char *text = file ? cli_read_text_file("tokenize", "-f", file, &len) : strdup(prompt);
    if (!text) {
        if (!file) fprintf(stderr, "ctorch tokenize: error: out of memory\n");
        return 1;
    }
    if (!file) len = strlen(text);
    if (escape) len = cli_unescape(text, len);
    gguf_file *f = NULL;
    llm_tokenizer *t = NULL;
    int32_t *ids = NULL;
    int n = 0, rc = 1;
    ct_status st = gguf_open(model, &f);
    if (!st) st = llm_tokenizer_load(f, &t);
    if (!st) {
        const char *s = text;
        st = llm_tokenize(t, s, len, add_special, parse_special, NULL, 0, &n);
        if (st == CT_ERR_RANGE) {
            ids = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
            st = ids ? llm_tokenize(t, s, len, add_special, parse_special, ids, n, &n) : CT_ERR_OOM;
        }
    }
    if (st) {
        fprintf(stderr, "ctorch tokenize: %s\n", ct_last_error()[0] ? ct_last_error() : ct_status_name(st));
    } else {
        for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", (int)ids[i]);
        printf("\n");
        rc = 0;
    }
    free(ids);
    free(text);
    llm_tokenizer_free(t);
    gguf_close(f);
    return rc;
}
