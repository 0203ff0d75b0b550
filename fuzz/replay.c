/* Replays the fuzz corpus through fuzz_gguf.c's entry function with the normal
 * compiler and no libFuzzer, so the suite (and its ASan/UBSan run) fails when a
 * reader bounds check goes missing, not only the fuzzer. Every corpus file is fed
 * whole and then cut at every length: a file cut short must be refused cleanly.
 * Usage: fuzz_replay DIR|FILE...   (exit 0 when every input ran; 1 when none did) */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static long g_files, g_runs;

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_replay: cannot open %s\n", path);
        return 1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                fprintf(stderr, "fuzz_replay: out of memory reading %s\n", path);
                return 1;
            }
            buf = nb;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    fclose(f);
    /* Each prefix in a buffer of its own size, so ASan sees a read past its end. */
    for (size_t n = len + 1; n-- > 0;) {
        uint8_t *cut = malloc(n ? n : 1);
        if (!cut) break;
        memcpy(cut, buf, n);
        LLVMFuzzerTestOneInput(cut, n);
        free(cut);
        g_runs++;
    }
    free(buf);
    g_files++;
    return 0;
}

static int replay_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "fuzz_replay: %s does not exist\n", path);
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) return replay_file(path);
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "fuzz_replay: cannot read the folder %s\n", path);
        return 1;
    }
    int bad = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        bad |= replay_path(sub);
    }
    closedir(d);
    return bad;
}

int main(int argc, char **argv)
{
    int bad = 0;
    for (int i = 1; i < argc; i++) bad |= replay_path(argv[i]);
    printf("fuzz_replay: %ld files, %ld inputs (whole and every prefix)\n", g_files, g_runs);
    return bad || g_files == 0;
}
