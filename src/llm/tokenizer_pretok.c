/* Byte-level BPE pre-tokenizers: llama.cpp's per-model regex lists
 * (llama-vocab.cpp, llm_tokenizer_bpe), matched by a small backtracking
 * engine over code points.
 *
 * A pre-tokenizer is a list of stages, each one regex applied to every
 * fragment the previous stages produced (the whole text at first). Inside a
 * fragment the regex is searched left to right as std::regex_iterator does:
 * every match becomes a fragment, and so does every run of text between two
 * matches (llama.cpp's unicode_regex_split keeps unmatched text as words).
 * Lookaheads and `$` see the fragment's end as the end of the input.
 *
 * A regex is a list of alternatives (the first that matches wins, as in
 * ECMAScript), an alternative a sequence of items: a character class repeated
 * min..max times (greedy, backtracking), an English contraction ('s 't 're 've
 * 'm 'll 'd; optional or required, case-sensitive or ASCII-case-insensitive),
 * the lookahead (?!\S), or `$`. That expresses every list below. llama.cpp
 * splits the gpt2, llama3 and qwen2 regexes with hand-written code instead of
 * std::regex; that code behaves as the regexes do.
 *
 * Classes follow llama.cpp: \p{L} \p{N} \p{P} \p{S} \p{M} by Unicode general
 * category (ASCII included), \s is White_Space, and non-ASCII whitespace counts
 * as U+000B when a literal range is tested (llama.cpp rewrites it so before
 * running std::wregex), so e.g. U+3000 never falls in DeepSeek's 　-。 range. */
#include <stdlib.h>
#include <string.h>

#include "llm/tokenizer_int.h"

enum { F_WS = 1, F_L = 2, F_N = 4, F_P = 8, F_S = 16, F_M = 32 };

enum pt_kind { IT_END, IT_ALT, IT_CLASS, IT_CONTR, IT_CONTR_CI, IT_NOT_NONSPACE, IT_EOS };

enum pt_class {
    K_SPACE,        /* ' ' */
    K_WS,           /* \s */
    K_L,            /* \p{L} */
    K_N,            /* \p{N} */
    K_OTHER,        /* [^\s\p{L}\p{N}] */
    K_NL,           /* [\r\n] */
    K_PREFIX,       /* [^\r\n\p{L}\p{N}] */
    K_UPPERISH,     /* (?=\p{L})[^a-z]: llama.cpp's stand-in for [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] */
    K_LOWERISH,     /* (?=\p{L})[^A-Z]: llama.cpp's stand-in for [\p{Ll}\p{Lm}\p{Lo}\p{M}] */
    K_NL_SLASH,     /* [\r\n/] */
    K_DIGIT,        /* [0-9] */
    K_P,            /* \p{P} */
    K_FALCON_P,     /* [\p{P}\$\+<=>\^~\|`] */
    K_DEFAULT_P,    /* [\p{P}\$\+<=>\^~\|] */
    K_LM,           /* [\p{L}\p{M}] */
    K_PS,           /* [\p{P}\p{S}] */
    K_DS3_PREFIX,   /* [^\r\n\p{L}\p{P}\p{S}] */
    K_ASCII_PUNCT,  /* [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~] */
    K_ASCII_ALPHA,  /* [A-Za-z] */
    K_DSL_LETTER,   /* DeepSeek LLM's literal letter ranges */
    K_DSL_PUNCT,    /* [!-/:-~！-／：-～‘-‟　-。] */
    K_CJK_DS,       /* [一-龥ࠀ-一가-퟿] */
    K_CJK_DS3,      /* [一-龥぀-ゟ゠-ヿ] */
    K_BLOOM,        /* [^(\s|.,!?…。，、।۔،)] */
    K_OTHER_NO_M,   /* [^\s\p{L}\p{M}\p{N}] */
    K_LF,           /* \n */
    K_NOT_LF        /* [^\n] */
};

typedef struct pt_item {
    uint8_t kind, cls;
    uint16_t min, max;
} pt_item;

#define MANY 0xFFFF
#define CL(k, lo, hi) {IT_CLASS, k, lo, hi}
#define ONE(k) CL(k, 1, 1)
#define OPT(k) CL(k, 0, 1)
#define STAR(k) CL(k, 0, MANY)
#define PLUS(k) CL(k, 1, MANY)
#define CONTR {IT_CONTR, 0, 1, 1}
#define CONTR_CI {IT_CONTR_CI, 0, 1, 1}
#define OPT_CONTR_CI {IT_CONTR_CI, 0, 0, 1}
#define NOT_NONSPACE {IT_NOT_NONSPACE, 0, 0, 0}
#define EOS {IT_EOS, 0, 0, 0}
#define ALT {IT_ALT, 0, 0, 0}
#define END {IT_END, 0, 0, 0}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S) */
static const pt_item re_gpt2[] = {CONTR, ALT, OPT(K_SPACE), PLUS(K_L), ALT, OPT(K_SPACE), PLUS(K_N), ALT,
                                  OPT(K_SPACE), PLUS(K_OTHER), ALT, PLUS(K_WS), NOT_NONSPACE, END};
/* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
#define LLAMA3_LIKE(digits)                                                                                            \
    CONTR_CI, ALT, OPT(K_PREFIX), PLUS(K_L), ALT, digits, ALT, OPT(K_SPACE), PLUS(K_OTHER), STAR(K_NL), ALT,          \
        STAR(K_WS), PLUS(K_NL), ALT, PLUS(K_WS), NOT_NONSPACE, ALT, PLUS(K_WS), END
static const pt_item re_llama3[] = {LLAMA3_LIKE(CL(K_N, 1, 3))};
static const pt_item re_qwen2[] = {LLAMA3_LIKE(ONE(K_N))};
/* (?:'[sS]|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+ */
static const pt_item re_seed_coder[] = {CONTR_CI, ALT, OPT(K_PREFIX), PLUS(K_L), ALT, ONE(K_N), ALT, OPT(K_SPACE),
                                        PLUS(K_OTHER), ALT, STAR(K_WS), PLUS(K_NL), ALT, PLUS(K_WS), NOT_NONSPACE,
                                        ALT, PLUS(K_WS), END};
/* '(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+ */
static const pt_item re_bailingmoe[] = {CONTR_CI, ALT, OPT(K_PREFIX), PLUS(K_L), ALT, ONE(K_N), ALT, OPT(K_SPACE),
                                        PLUS(K_OTHER), STAR(K_NL), ALT, STAR(K_WS), ONE(K_NL), ALT, PLUS(K_WS),
                                        NOT_NONSPACE, ALT, PLUS(K_WS), END};
/* Tekken / GPT-4o: [^\r\n\p{L}\p{N}]?U*W+|[^\r\n\p{L}\p{N}]?U+W*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * (GPT-4o: an optional contraction after each word, \p{N}{1,3}) */
static const pt_item re_tekken[] = {OPT(K_PREFIX), STAR(K_UPPERISH), PLUS(K_LOWERISH), ALT, OPT(K_PREFIX),
                                    PLUS(K_UPPERISH), STAR(K_LOWERISH), ALT, ONE(K_N), ALT, OPT(K_SPACE),
                                    PLUS(K_OTHER), STAR(K_NL_SLASH), ALT, STAR(K_WS), PLUS(K_NL), ALT, PLUS(K_WS),
                                    NOT_NONSPACE, ALT, PLUS(K_WS), END};
static const pt_item re_gpt4o[] = {OPT(K_PREFIX), STAR(K_UPPERISH), PLUS(K_LOWERISH), OPT_CONTR_CI, ALT,
                                   OPT(K_PREFIX), PLUS(K_UPPERISH), STAR(K_LOWERISH), OPT_CONTR_CI, ALT,
                                   CL(K_N, 1, 3), ALT, OPT(K_SPACE), PLUS(K_OTHER), STAR(K_NL_SLASH), ALT,
                                   STAR(K_WS), PLUS(K_NL), ALT, PLUS(K_WS), NOT_NONSPACE, ALT, PLUS(K_WS), END};
/* DeepSeek V3: [!"#...~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static const pt_item re_ds3_main[] = {ONE(K_ASCII_PUNCT), PLUS(K_ASCII_ALPHA), ALT, OPT(K_DS3_PREFIX), PLUS(K_LM),
                                      ALT, OPT(K_SPACE), PLUS(K_PS), STAR(K_NL), ALT, STAR(K_WS), PLUS(K_NL), ALT,
                                      PLUS(K_WS), NOT_NONSPACE, ALT, PLUS(K_WS), END};
/* Qwen 3.5: (?:'[sS]|...)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static const pt_item re_qwen35[] = {CONTR_CI, ALT, OPT(K_PREFIX), PLUS(K_LM), ALT, ONE(K_N), ALT, OPT(K_SPACE),
                                    PLUS(K_OTHER_NO_M), STAR(K_NL), ALT, STAR(K_WS), PLUS(K_NL), ALT, PLUS(K_WS),
                                    NOT_NONSPACE, ALT, PLUS(K_WS), END};
/* MiniCPM 5 (after \p{N}{1,3}): the llama3 regex with \p{N}+ */
static const pt_item re_minicpm5[] = {LLAMA3_LIKE(PLUS(K_N))};
/* ufakzeka: qwen2's regex without the contractions */
static const pt_item re_ufakzeka[] = {OPT(K_PREFIX), PLUS(K_L), ALT, ONE(K_N), ALT, OPT(K_SPACE), PLUS(K_OTHER),
                                      STAR(K_NL), ALT, STAR(K_WS), PLUS(K_NL), ALT, PLUS(K_WS), NOT_NONSPACE, ALT,
                                      PLUS(K_WS), END};
/* Jais 2: llama3's regex with whitespace runs cut in powers of two: \s{512}(?!\S)|...|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1} */
#define WS_EXACT(n) CL(K_WS, n, n), NOT_NONSPACE, ALT
static const pt_item re_jais2[] = {CONTR_CI, ALT, OPT(K_PREFIX), PLUS(K_L), ALT, CL(K_N, 1, 3), ALT, OPT(K_SPACE),
                                   PLUS(K_OTHER), STAR(K_NL), ALT, STAR(K_WS), PLUS(K_NL), ALT, WS_EXACT(512),
                                   WS_EXACT(256), WS_EXACT(128), WS_EXACT(64), WS_EXACT(32), WS_EXACT(16),
                                   WS_EXACT(8), WS_EXACT(4), CL(K_WS, 1, 2), NOT_NONSPACE, ALT, ONE(K_WS), END};
/* Spark 2.5's main regex: DeepSeek V3's with [\r\n] alone and no [\r\n]* after punctuation */
static const pt_item re_spark_main[] = {ONE(K_ASCII_PUNCT), PLUS(K_ASCII_ALPHA), ALT, OPT(K_DS3_PREFIX), PLUS(K_LM),
                                        ALT, OPT(K_SPACE), PLUS(K_PS), ALT, ONE(K_NL), ALT, PLUS(K_WS), NOT_NONSPACE,
                                        ALT, PLUS(K_WS), END};
static const pt_item re_lines[] = {PLUS(K_NOT_LF), ALT, PLUS(K_LF), END}; /* [^\n]+|[\n]+ */
static const pt_item re_n1[] = {ONE(K_N), END};          /* \p{N} */
static const pt_item re_n3[] = {CL(K_N, 1, 3), END};     /* \p{N}{1,3} */
static const pt_item re_nplus[] = {PLUS(K_N), END};      /* \p{N}+ */
static const pt_item re_digit3[] = {CL(K_DIGIT, 3, 3), END};
static const pt_item re_falcon_p[] = {PLUS(K_FALCON_P), END};
static const pt_item re_default_p[] = {PLUS(K_DEFAULT_P), END};
static const pt_item re_nl1[] = {ONE(K_NL), END};
static const pt_item re_dsl_letters[] = {OPT(K_WS), PLUS(K_DSL_LETTER), END};
static const pt_item re_dsl_punct[] = {OPT(K_WS), PLUS(K_DSL_PUNCT), END};
static const pt_item re_ws_eos[] = {PLUS(K_WS), EOS, END}; /* \s+$ */
static const pt_item re_cjk_ds[] = {PLUS(K_CJK_DS), END};
static const pt_item re_cjk_ds3[] = {PLUS(K_CJK_DS3), END};
static const pt_item re_ws_letters[] = {OPT(K_WS), PLUS(K_L), END}; /* \s?\p{L}+ */
static const pt_item re_ws_punct[] = {OPT(K_WS), PLUS(K_P), END};   /* \s?\p{P}+ */
static const pt_item re_bloom[] = {OPT(K_SPACE), PLUS(K_BLOOM), END};

/* Stage lists, NULL-terminated, indexed by llm_pretok. */
static const pt_item *const pre_gpt2[] = {re_gpt2, NULL};
static const pt_item *const pre_llama3[] = {re_llama3, NULL};
static const pt_item *const pre_qwen2[] = {re_qwen2, NULL};
static const pt_item *const pre_default[] = {re_default_p, re_gpt2, re_nplus, re_digit3, NULL};
static const pt_item *const pre_starcoder[] = {re_n1, re_gpt2, NULL};
static const pt_item *const pre_falcon[] = {re_falcon_p, re_gpt2, re_digit3, NULL};
static const pt_item *const pre_deepseek_llm[] = {re_nl1,    re_dsl_letters, re_dsl_punct, re_ws_eos,
                                                  re_cjk_ds, re_nplus,       NULL};
static const pt_item *const pre_deepseek_coder[] = {re_nl1, re_ws_letters, re_ws_punct, re_cjk_ds, re_n1, NULL};
static const pt_item *const pre_deepseek3[] = {re_n3, re_cjk_ds3, re_ds3_main, NULL};
static const pt_item *const pre_bloom[] = {re_bloom, NULL};
static const pt_item *const pre_viking[] = {re_bloom, re_n1, NULL};
static const pt_item *const pre_tekken[] = {re_tekken, NULL};
static const pt_item *const pre_gpt4o[] = {re_gpt4o, NULL};
static const pt_item *const pre_seed_coder[] = {re_seed_coder, NULL};
static const pt_item *const pre_bailingmoe[] = {re_bailingmoe, NULL};
static const pt_item *const pre_qwen35[] = {re_qwen35, NULL};
static const pt_item *const pre_minicpm5[] = {re_n3, re_minicpm5, NULL};
static const pt_item *const pre_ufakzeka[] = {re_ufakzeka, NULL};
static const pt_item *const pre_jais2[] = {re_jais2, NULL};
static const pt_item *const pre_spark[] = {re_n3, re_cjk_ds3, re_spark_main, re_n1, NULL};
static const pt_item *const pre_laguna[] = {re_lines, re_qwen2, NULL};

static const pt_item *const *const pretok_stages[LLM_PRETOK_COUNT] = {
    [LLM_PRETOK_GPT2] = pre_gpt2,
    [LLM_PRETOK_LLAMA3] = pre_llama3,
    [LLM_PRETOK_QWEN2] = pre_qwen2,
    [LLM_PRETOK_DEFAULT] = pre_default,
    [LLM_PRETOK_STARCODER] = pre_starcoder,
    [LLM_PRETOK_FALCON] = pre_falcon,
    [LLM_PRETOK_DEEPSEEK_LLM] = pre_deepseek_llm,
    [LLM_PRETOK_DEEPSEEK_CODER] = pre_deepseek_coder,
    [LLM_PRETOK_DEEPSEEK3] = pre_deepseek3,
    [LLM_PRETOK_BLOOM] = pre_bloom,
    [LLM_PRETOK_VIKING] = pre_viking,
    [LLM_PRETOK_TEKKEN] = pre_tekken,
    [LLM_PRETOK_GPT4O] = pre_gpt4o,
    [LLM_PRETOK_SEED_CODER] = pre_seed_coder,
    [LLM_PRETOK_BAILINGMOE] = pre_bailingmoe,
    [LLM_PRETOK_QWEN35] = pre_qwen35,
    [LLM_PRETOK_MINICPM5] = pre_minicpm5,
    [LLM_PRETOK_UFAKZEKA] = pre_ufakzeka,
    [LLM_PRETOK_JAIS2] = pre_jais2,
    [LLM_PRETOK_SPARK2_5] = pre_spark,
    [LLM_PRETOK_LAGUNA] = pre_laguna,
};

/* ---- names (llama.cpp's llama_vocab::impl::load) ---- */

static const struct pretok_name {
    const char *name;
    uint8_t pre;
    bool ignore_merges;
} pretok_names[] = {
    /* the first entry of each kind is its canonical name */
    {"gpt2", LLM_PRETOK_GPT2, false},
    {"llama3", LLM_PRETOK_LLAMA3, true},
    {"qwen2", LLM_PRETOK_QWEN2, false},
    {"default", LLM_PRETOK_DEFAULT, false},
    {"starcoder", LLM_PRETOK_STARCODER, false},
    {"falcon", LLM_PRETOK_FALCON, false},
    {"deepseek-llm", LLM_PRETOK_DEEPSEEK_LLM, false},
    {"deepseek-coder", LLM_PRETOK_DEEPSEEK_CODER, false},
    {"deepseek-v3", LLM_PRETOK_DEEPSEEK3, false},
    {"bloom", LLM_PRETOK_BLOOM, false},
    {"viking", LLM_PRETOK_VIKING, false},
    {"tekken", LLM_PRETOK_TEKKEN, true},
    {"gpt-4o", LLM_PRETOK_GPT4O, false},
    {"seed-coder", LLM_PRETOK_SEED_CODER, false},
    {"bailingmoe", LLM_PRETOK_BAILINGMOE, false},
    {"qwen35", LLM_PRETOK_QWEN35, false},
    {"minicpm5", LLM_PRETOK_MINICPM5, true},
    {"ufakzeka", LLM_PRETOK_UFAKZEKA, false},
    {"jais-2", LLM_PRETOK_JAIS2, false},
    {"spark2_5", LLM_PRETOK_SPARK2_5, false},
    {"laguna", LLM_PRETOK_LAGUNA, false},
    /* aliases */
    {"gpt-2", LLM_PRETOK_GPT2, false},
    {"phi-2", LLM_PRETOK_GPT2, false},
    {"mpt", LLM_PRETOK_GPT2, false},
    {"olmo", LLM_PRETOK_GPT2, false},
    {"jais", LLM_PRETOK_GPT2, false},
    {"trillion", LLM_PRETOK_GPT2, false},
    {"granite-docling", LLM_PRETOK_GPT2, false},
    {"exaone4", LLM_PRETOK_GPT2, false},
    {"jina-es", LLM_PRETOK_GPT2, false},
    {"jina-de", LLM_PRETOK_GPT2, false},
    {"jina-v1-en", LLM_PRETOK_GPT2, false},
    {"jina-v2-es", LLM_PRETOK_GPT2, false},
    {"jina-v2-de", LLM_PRETOK_GPT2, false},
    {"jina-v2-code", LLM_PRETOK_GPT2, false},
    {"roberta-bpe", LLM_PRETOK_GPT2, false},
    {"gigachat", LLM_PRETOK_GPT2, false},
    {"a.x-4.0", LLM_PRETOK_GPT2, false},
    {"mellum", LLM_PRETOK_GPT2, false},
    {"modern-bert", LLM_PRETOK_GPT2, false},
    {"llama-v3", LLM_PRETOK_LLAMA3, true},
    {"llama-bpe", LLM_PRETOK_LLAMA3, true},
    {"falcon3", LLM_PRETOK_LLAMA3, true},
    {"falcon-h1", LLM_PRETOK_LLAMA3, true},
    {"pixtral", LLM_PRETOK_LLAMA3, true},
    {"midm-2.0", LLM_PRETOK_LLAMA3, true},
    {"lfm2", LLM_PRETOK_LLAMA3, true},
    {"jina-v5-nano", LLM_PRETOK_LLAMA3, true},
    {"glm4", LLM_PRETOK_LLAMA3, true},
    {"glm5", LLM_PRETOK_LLAMA3, true},
    {"dbrx", LLM_PRETOK_LLAMA3, false},
    {"smaug-bpe", LLM_PRETOK_LLAMA3, false},
    {"chatglm-bpe", LLM_PRETOK_LLAMA3, false},
    {"deepseek-r1-qwen", LLM_PRETOK_QWEN2, false},
    {"stablelm2", LLM_PRETOK_QWEN2, false},
    {"megrez", LLM_PRETOK_QWEN2, false},
    {"hunyuan", LLM_PRETOK_QWEN2, false},
    {"solar-open", LLM_PRETOK_QWEN2, false},
    {"grok-2", LLM_PRETOK_QWEN2, false},
    {"kormo", LLM_PRETOK_QWEN2, false},
    {"f2llmv2", LLM_PRETOK_QWEN2, false},
    {"refact", LLM_PRETOK_STARCODER, false},
    {"command-r", LLM_PRETOK_STARCODER, false},
    {"smollm", LLM_PRETOK_STARCODER, false},
    {"codeshell", LLM_PRETOK_STARCODER, false},
    {"exaone", LLM_PRETOK_STARCODER, false},
    {"minerva-7b", LLM_PRETOK_STARCODER, false},
    {"mellum2", LLM_PRETOK_STARCODER, false},
    {"hunyuan-dense", LLM_PRETOK_DEEPSEEK3, false},
    {"joyai-llm", LLM_PRETOK_DEEPSEEK3, false},
    {"hy_v4", LLM_PRETOK_DEEPSEEK3, false},
    {"poro-chat", LLM_PRETOK_BLOOM, false},
    {"gpt3-finnish", LLM_PRETOK_BLOOM, false},
    {"llama4", LLM_PRETOK_GPT4O, false},
    {"minimax-m2", LLM_PRETOK_GPT4O, false},
    {"kanana2", LLM_PRETOK_GPT4O, false},
    {"talkie", LLM_PRETOK_GPT4O, false},
    {"bailingmoe2", LLM_PRETOK_BAILINGMOE, false},
    {"llada-moe", LLM_PRETOK_BAILINGMOE, false},
};

bool llm_pretok_lookup(const char *name, llm_pretok *pre, bool *ignore_merges)
{
    if (!name) return false;
    for (size_t i = 0; i < sizeof pretok_names / sizeof pretok_names[0]; i++) {
        if (strcmp(name, pretok_names[i].name)) continue;
        if (pre) *pre = (llm_pretok)pretok_names[i].pre;
        if (ignore_merges) *ignore_merges = pretok_names[i].ignore_merges;
        return true;
    }
    return false;
}

const char *llm_pretok_name(llm_pretok pre)
{
    for (size_t i = 0; i < sizeof pretok_names / sizeof pretok_names[0]; i++)
        if (pretok_names[i].pre == pre) return pretok_names[i].name;
    return "?";
}

/* ---- classes ---- */

static const uint32_t dsl_letters[][2] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA}, {0x1BC, 0x1BF},
    {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377}, {0x37B, 0x37D}, {0x37F, 0x37F},
    {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481},
    {0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
    {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D},
    {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC},
    {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102},
    {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
    {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3},
    {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF},
    {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F},
    {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF},
    {0x1E900, 0x1E943},
};

static bool in_table(const uint32_t (*r)[2], size_t n, uint32_t c)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c < r[mid][0]) hi = mid;
        else if (c > r[mid][1]) lo = mid + 1;
        else return true;
    }
    return false;
}

static bool in(uint32_t c, uint32_t lo, uint32_t hi) { return c >= lo && c <= hi; }
static bool is_nl(uint32_t c) { return c == '\r' || c == '\n'; }

static bool bloom_stop(uint32_t c)
{
    static const uint32_t stop[] = {'(', '|', '.', ',', '!', '?', ')', 0x2026, 0x3002, 0xFF0C, 0x3001, 0x964, 0x6D4, 0x60C};
    for (size_t i = 0; i < sizeof stop / sizeof stop[0]; i++)
        if (c == stop[i]) return true;
    return false;
}

/* c: the code point with non-ASCII whitespace already turned into U+000B; f: its F_* flags. */
static bool class_has(uint8_t k, uint32_t c, unsigned f)
{
    switch (k) {
    case K_SPACE: return c == ' ';
    case K_WS: return f & F_WS;
    case K_L: return f & F_L;
    case K_N: return f & F_N;
    case K_OTHER: return !(f & (F_WS | F_L | F_N));
    case K_NL: return is_nl(c);
    case K_PREFIX: return !is_nl(c) && !(f & (F_L | F_N));
    case K_UPPERISH: return (f & F_L) && !in(c, 'a', 'z');
    case K_LOWERISH: return (f & F_L) && !in(c, 'A', 'Z');
    case K_NL_SLASH: return is_nl(c) || c == '/';
    case K_DIGIT: return in(c, '0', '9');
    case K_P: return f & F_P;
    case K_FALCON_P: return (f & F_P) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' ||
                            c == '~' || c == '|' || c == '`';
    case K_DEFAULT_P: return (f & F_P) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' ||
                             c == '~' || c == '|';
    case K_LM: return f & (F_L | F_M);
    case K_PS: return f & (F_P | F_S);
    case K_DS3_PREFIX: return !is_nl(c) && !(f & (F_L | F_P | F_S));
    case K_ASCII_PUNCT: return c < 0x80 && (f & (F_P | F_S));
    case K_ASCII_ALPHA: return in(c, 'A', 'Z') || in(c, 'a', 'z');
    case K_DSL_LETTER: return in_table(dsl_letters, sizeof dsl_letters / sizeof dsl_letters[0], c);
    case K_DSL_PUNCT: return in(c, 0x21, 0x2F) || in(c, 0x3A, 0x7E) || in(c, 0xFF01, 0xFF0F) || in(c, 0xFF1A, 0xFF5E) ||
                             in(c, 0x2018, 0x201F) || in(c, 0x3000, 0x3002);
    case K_CJK_DS: return in(c, 0x800, 0x9FA5) || in(c, 0xAC00, 0xD7FF);
    case K_CJK_DS3: return in(c, 0x4E00, 0x9FA5) || in(c, 0x3040, 0x30FF);
    case K_BLOOM: return !(f & F_WS) && !bloom_stop(c);
    case K_OTHER_NO_M: return !(f & (F_WS | F_L | F_M | F_N));
    case K_LF: return c == '\n';
    case K_NOT_LF: return c != '\n';
    default: return false;
    }
}

/* ---- matching ---- */

#define NOMATCH ((size_t)-1)

typedef struct pt_text {
    const uint32_t *c; /* code points, non-ASCII whitespace as U+000B */
    const uint8_t *f;  /* F_* flags */
    size_t end;        /* end of the fragment being searched */
    size_t ws_tail;    /* start of the whitespace run that ends the fragment (end if none) */
} pt_text;

static uint32_t ascii_lower(uint32_t c) { return in(c, 'A', 'Z') ? c + 32 : c; }

/* 's 't 're 've 'm 'll 'd at i: the end, or 0. */
static size_t contraction(const pt_text *t, size_t i, bool icase)
{
    if (i + 1 >= t->end || t->c[i] != '\'') return 0;
    uint32_t a = icase ? ascii_lower(t->c[i + 1]) : t->c[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (i + 2 >= t->end) return 0;
    uint32_t b = icase ? ascii_lower(t->c[i + 2]) : t->c[i + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
}

/* Matches the items from it (to the next ALT/END) at pos; the end or NOMATCH.
 * Recursion depth is the number of items of one alternative. */
static size_t match_seq(const pt_text *t, const pt_item *it, size_t pos)
{
    switch (it->kind) {
    case IT_END:
    case IT_ALT: return pos;
    case IT_EOS: return pos == t->end ? match_seq(t, it + 1, pos) : NOMATCH;
    case IT_NOT_NONSPACE: return pos == t->end || (t->f[pos] & F_WS) ? match_seq(t, it + 1, pos) : NOMATCH;
    case IT_CONTR:
    case IT_CONTR_CI: {
        size_t e = contraction(t, pos, it->kind == IT_CONTR_CI);
        if (e) {
            size_t r = match_seq(t, it + 1, e);
            if (r != NOMATCH) return r;
        }
        return it->min ? NOMATCH : match_seq(t, it + 1, pos);
    }
    default: {
        /* \s+$ from the fragment's trailing whitespace: scanning instead costs
         * O(run) at each position of a long run that does not end the fragment */
        if (it[1].kind == IT_EOS && it->cls == K_WS) {
            size_t n = t->end - pos;
            return pos >= t->ws_tail && n >= it->min && n <= it->max ? match_seq(t, it + 1, t->end) : NOMATCH;
        }
        size_t n = 0;
        while (n < it->max && pos + n < t->end && class_has(it->cls, t->c[pos + n], t->f[pos + n])) n++;
        for (;; n--) { /* greedy: longest run first, then give back one at a time */
            if (n < it->min) return NOMATCH;
            size_t r = match_seq(t, it + 1, pos + n);
            if (r != NOMATCH) return r;
            if (n == 0) return NOMATCH;
        }
    }
    }
}

/* The first alternative of re that matches at pos; its end or NOMATCH. */
static size_t match_at(const pt_text *t, const pt_item *re, size_t pos)
{
    for (const pt_item *alt = re;;) {
        size_t r = match_seq(t, alt, pos);
        if (r != NOMATCH) return r;
        while (alt->kind != IT_ALT && alt->kind != IT_END) alt++;
        if (alt->kind == IT_END) return NOMATCH;
        alt++;
    }
}

/* Splits each fragment frag[0..nf) (ends) by re into out; returns the new count (<= the code point count). */
static size_t run_stage(const pt_item *re, const uint32_t *c, const uint8_t *f, const size_t *frag, size_t nf,
                        size_t *out)
{
    size_t n_out = 0, start = 0;
    for (size_t k = 0; k < nf; k++) {
        pt_text t = {c, f, frag[k], frag[k]};
        while (t.ws_tail > start && (f[t.ws_tail - 1] & F_WS)) t.ws_tail--;
        size_t gap = start; /* start of the unmatched text before the next match */
        for (size_t pos = start; pos < t.end;) {
            size_t e = match_at(&t, re, pos);
            if (e == NOMATCH || e == pos) { /* every regex above needs at least one character */
                pos++;
                continue;
            }
            if (pos > gap) out[n_out++] = pos;
            out[n_out++] = e;
            pos = gap = e;
        }
        if (gap < t.end) out[n_out++] = t.end;
        start = t.end;
    }
    return n_out;
}

static uint8_t cp_flags(uint32_t cp)
{
    if (tok_uni_is_space(cp)) return F_WS;
    if (tok_uni_is_letter(cp)) return F_L;
    if (tok_uni_is_number(cp)) return F_N;
    if (tok_uni_is_punct(cp)) return F_P;
    if (tok_uni_is_symbol(cp)) return F_S;
    if (tok_uni_is_mark(cp)) return F_M;
    return 0;
}

int tok_pretok_run(llm_pretok pre, const uint32_t *cp, size_t n, size_t *ends)
{
    if (n == 0) return 0;
    if ((unsigned)pre >= LLM_PRETOK_COUNT || n > (size_t)INT32_MAX) return -1;
    uint32_t *c = malloc(n * sizeof *c);
    uint8_t *f = malloc(n);
    size_t *tmp = malloc(n * sizeof *tmp);
    if (!c || !f || !tmp) {
        free(c), free(f), free(tmp);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        f[i] = cp_flags(cp[i]);
        c[i] = (f[i] & F_WS) && cp[i] > 0x7F ? 0x0B : cp[i];
    }
    size_t *cur = ends, *next = tmp, nf = 1;
    cur[0] = n;
    for (const pt_item *const *st = pretok_stages[pre]; *st; st++) {
        nf = run_stage(*st, c, f, cur, nf, next);
        size_t *sw = cur;
        cur = next, next = sw;
    }
    if (cur != ends) memcpy(ends, cur, nf * sizeof *ends);
    free(c), free(f), free(tmp);
    return (int)nf;
}
