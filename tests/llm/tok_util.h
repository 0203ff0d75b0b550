/* Helpers shared by the tokenizer tests (test_tokenizer.c, test_tokenizer_refdata.c). */
#ifndef CTORCH_TEST_TOK_UTIL_H
#define CTORCH_TEST_TOK_UTIL_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "llm/tokenizer_int.h"

/* Tokenizes into a malloc'ed array; *n = count. */
static inline int32_t *tok(const llm_tokenizer *t, const char *s, size_t len, bool add, bool special, int *n)
{
    int need = 0;
    ct_status st = llm_tokenize(t, s, len, add, special, NULL, 0, &need);
    CHECK(st == CT_OK || st == CT_ERR_RANGE);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(need + 1));
    CHECK_OK(llm_tokenize(t, s, len, add, special, ids, need, n));
    CHECK(*n == need);
    return ids;
}

static inline bool same_ids(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na == nb && (na == 0 || memcmp(a, b, sizeof(int32_t) * (size_t)na) == 0);
}

#endif
