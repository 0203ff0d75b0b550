/* Chat templates. Each format is a few literal strings around every turn; the
 * Jinja text in the file is only searched for the markers that identify it. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/tensor.h"
#include "llm/chat.h"

static const char *const g_names[LLM_CHAT_COUNT] = {"zephyr", "gemma", "llama3", "chatml", "llama2"};

const char *llm_chat_name(llm_chat_tmpl t)
{
    return (unsigned)t < LLM_CHAT_COUNT ? g_names[t] : "?";
}

ct_status llm_chat_from_name(const char *name, llm_chat_tmpl *out)
{
    if (!name || !out) return core_err(CT_ERR_INVALID_ARG, "chat template: NULL argument");
    static const struct {
        const char *alias;
        llm_chat_tmpl t;
    } aliases[] = {{"tinyllama", LLM_CHAT_ZEPHYR}, {"gemma3", LLM_CHAT_GEMMA}, {"llama-3", LLM_CHAT_LLAMA3},
                   {"qwen", LLM_CHAT_CHATML}, {"llama-2", LLM_CHAT_LLAMA2}, {"mistral", LLM_CHAT_LLAMA2}};
    for (int i = 0; i < LLM_CHAT_COUNT; i++)
        if (strcasecmp(name, g_names[i]) == 0) return *out = (llm_chat_tmpl)i, CT_OK;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcasecmp(name, aliases[i].alias) == 0) return *out = aliases[i].t, CT_OK;
    return core_err(CT_ERR_NOT_FOUND, "unknown chat template '%s' (known: zephyr, gemma, llama3, chatml, llama2)",
                    name);
}

bool llm_chat_detect(const char *j, llm_chat_tmpl *out)
{
    if (!j || !out) return false;
    /* Most specific markers first: a llama3 template may also mention [INST] in comments. */
    if (strstr(j, "<|start_header_id|>")) *out = LLM_CHAT_LLAMA3;
    else if (strstr(j, "<start_of_turn>")) *out = LLM_CHAT_GEMMA;
    else if (strstr(j, "<|im_start|>")) *out = LLM_CHAT_CHATML;
    else if (strstr(j, "<|assistant|>") && strstr(j, "<|user|>")) *out = LLM_CHAT_ZEPHYR;
    else if (strstr(j, "[INST]")) *out = LLM_CHAT_LLAMA2;
    else return false;
    return true;
}

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t len)
{
    if (b->oom) return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + len + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = 0;
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

/* Content without leading/trailing whitespace, as the gemma and llama3 templates trim it. */
static void put_trim(sbuf *b, const char *s)
{
    const char *e = s + strlen(s);
    while (s < e && (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')) s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\n' || e[-1] == '\t' || e[-1] == '\r')) e--;
    put(b, s, (size_t)(e - s));
}

static bool is_role(const llm_chat_msg *m, const char *r) { return strcmp(m->role, r) == 0; }

static void fmt_gemma(sbuf *b, const llm_chat_msg *msgs, int n, bool add)
{
    /* Gemma has no system role: the system text opens the first user turn. */
    const char *sys = NULL;
    for (int i = 0; i < n; i++) {
        if (is_role(&msgs[i], "system")) {
            sys = msgs[i].content;
            continue;
        }
        puts_(b, "<start_of_turn>");
        puts_(b, is_role(&msgs[i], "assistant") ? "model" : msgs[i].role);
        puts_(b, "\n");
        if (sys && is_role(&msgs[i], "user")) {
            put_trim(b, sys);
            puts_(b, "\n\n");
            sys = NULL;
        }
        put_trim(b, msgs[i].content);
        puts_(b, "<end_of_turn>\n");
    }
    if (add) puts_(b, "<start_of_turn>model\n");
}

static void fmt_llama2(sbuf *b, const llm_chat_msg *msgs, int n, bool add)
{
    const char *sys = NULL;
    (void)add; /* the [/INST] of the last user turn already opens the reply */
    for (int i = 0; i < n; i++) {
        if (is_role(&msgs[i], "system")) {
            sys = msgs[i].content;
        } else if (is_role(&msgs[i], "user")) {
            puts_(b, "[INST] ");
            if (sys) {
                puts_(b, "<<SYS>>\n");
                puts_(b, sys);
                puts_(b, "\n<</SYS>>\n\n");
                sys = NULL;
            }
            put_trim(b, msgs[i].content);
            puts_(b, " [/INST]");
        } else {
            puts_(b, " ");
            put_trim(b, msgs[i].content);
            puts_(b, " </s><s>");
        }
    }
}

ct_status llm_chat_format(llm_chat_tmpl t, const llm_chat_msg *msgs, int n, bool add_assistant, char **out)
{
    if (!out || (n > 0 && !msgs) || n < 0) return core_err(CT_ERR_INVALID_ARG, "llm_chat_format: bad arguments");
    *out = NULL;
    if ((unsigned)t >= LLM_CHAT_COUNT) return core_err(CT_ERR_INVALID_ARG, "llm_chat_format: unknown template %d", (int)t);
    for (int i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return core_err(CT_ERR_INVALID_ARG, "llm_chat_format: message %d has no role or content", i);
        if (!is_role(&msgs[i], "system") && !is_role(&msgs[i], "user") && !is_role(&msgs[i], "assistant"))
            return core_err(CT_ERR_INVALID_ARG, "llm_chat_format: message %d has unknown role '%s'", i, msgs[i].role);
    }
    sbuf b = {0};
    puts_(&b, "");
    switch (t) {
    case LLM_CHAT_ZEPHYR:
        for (int i = 0; i < n; i++) {
            puts_(&b, "<|");
            puts_(&b, msgs[i].role);
            puts_(&b, "|>\n");
            puts_(&b, msgs[i].content);
            puts_(&b, "</s>\n");
        }
        if (add_assistant) puts_(&b, "<|assistant|>\n");
        break;
    case LLM_CHAT_GEMMA:
        fmt_gemma(&b, msgs, n, add_assistant);
        break;
    case LLM_CHAT_LLAMA3:
        for (int i = 0; i < n; i++) {
            puts_(&b, "<|start_header_id|>");
            puts_(&b, msgs[i].role);
            puts_(&b, "<|end_header_id|>\n\n");
            put_trim(&b, msgs[i].content);
            puts_(&b, "<|eot_id|>");
        }
        if (add_assistant) puts_(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case LLM_CHAT_CHATML:
        for (int i = 0; i < n; i++) {
            puts_(&b, "<|im_start|>");
            puts_(&b, msgs[i].role);
            puts_(&b, "\n");
            puts_(&b, msgs[i].content);
            puts_(&b, "<|im_end|>\n");
        }
        if (add_assistant) puts_(&b, "<|im_start|>assistant\n");
        break;
    case LLM_CHAT_LLAMA2:
        fmt_llama2(&b, msgs, n, add_assistant);
        break;
    default:
        break;
    }
    if (b.oom) {
        free(b.p);
        return core_err(CT_ERR_OOM, "llm_chat_format: out of memory");
    }
    *out = b.p;
    return CT_OK;
}
