/* ctorch tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos] [--parse-special]
 * Prints the token ids, space-separated, on one line. Only the GGUF metadata
 * is read (no weights are loaded). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "formats/gguf.h"
#include "llm/tokenizer.h"

static int usage(void)
{
    fprintf(stderr, "usage: ctorch tokenize -m MODEL.gguf (-p TEXT | -f FILE) [--no-bos] [--parse-special]\n"
                    "  --no-bos         no BOS/EOS, even when the model adds them\n"
                    "  --parse-special  text like <|im_end|> becomes that control token\n");
    return 2;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += k;
        if (n == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) free(buf);
            buf = b;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool add_special = true, parse_special = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "-p") && i + 1 < argc) prompt = argv[++i];
        else if (!strcmp(argv[i], "-f") && i + 1 < argc) file = argv[++i];
        else if (!strcmp(argv[i], "--no-bos")) add_special = false;
        else if (!strcmp(argv[i], "--parse-special")) parse_special = true;
        else return usage();
    }
    if (!model || !prompt == !file) return usage();

    size_t len = 0;
    char *text = NULL;
    if (file) {
        text = read_file(file, &len);
        if (!text) {
            fprintf(stderr, "ctorch tokenize: cannot read %s\n", file);
            return 1;
        }
    }
    gguf_file *f = NULL;
    llm_tokenizer *t = NULL;
    int32_t *ids = NULL;
    int n = 0, rc = 1;
    ct_status st = gguf_open(model, &f);
    if (!st) st = llm_tokenizer_load(f, &t);
    if (!st) {
        const char *s = file ? text : prompt;
        if (!file) len = strlen(prompt);
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
