/* Atomic file replacement (see atomic_file.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/tensor.h"
#include "formats/atomic_file.h"

bool formats_write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n) {
        ssize_t k = write(fd, p, n < ((size_t)1 << 30) ? n : ((size_t)1 << 30));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (k == 0) errno = EIO;
            return false;
        }
        p += k;
        n -= (size_t)k;
    }
    return true;
}

/* The folder part of path ("." when there is none), malloc'ed. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = 0;
    }
    return d;
}

ct_status formats_check_output(const char *out_path, const char *in_path)
{
    if (!out_path || !*out_path) return core_err(CT_ERR_INVALID_ARG, "output path is empty");
    struct stat so, si;
    if (stat(out_path, &so) == 0) {
        if (S_ISDIR(so.st_mode)) return core_err(CT_ERR_INVALID_ARG, "cannot write '%s': it is a folder", out_path);
        /* same device and inode: the same file under any name (./x, a symlink, a hard link) */
        if (in_path && stat(in_path, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
            return core_err(CT_ERR_INVALID_ARG,
                            "refusing to write '%s': it is the input file '%s' (same file); choose another output name",
                            out_path, in_path);
    }
    char *dir = dir_of(out_path);
    if (!dir) return core_err(CT_ERR_OOM, "out of memory");
    struct stat sd;
    ct_status s = CT_OK;
    if (stat(dir, &sd) != 0 && errno == ENOENT)
        s = core_err(CT_ERR_IO, "cannot write '%s': folder '%s' does not exist", out_path, dir);
    else if (stat(dir, &sd) != 0)
        s = core_err(CT_ERR_IO, "cannot write '%s': folder '%s': %s", out_path, dir, strerror(errno));
    else if (!S_ISDIR(sd.st_mode))
        s = core_err(CT_ERR_INVALID_ARG, "cannot write '%s': '%s' is not a folder", out_path, dir);
    free(dir);
    return s;
}

/* The mode a plain open(O_CREAT, 0666) would give, or the replaced file's mode
 * (mkstemp makes 0600 files). umask can only be read by setting it, so this
 * briefly races with other threads creating files. */
static mode_t new_file_mode(const char *target)
{
    struct stat st;
    if (stat(target, &st) == 0) return st.st_mode & 07777;
    mode_t mask = umask(022);
    umask(mask);
    return 0666 & ~mask;
}

ct_status formats_atomic_write(const char *path, formats_fill_fn fill, void *ctx, const char *who)
{
    if (!path || !fill || !who) return core_err(CT_ERR_INVALID_ARG, "formats_atomic_write: null argument");
    ct_status s = formats_check_output(path, NULL);
    if (s != CT_OK) {
        char why[400]; /* core_err formats into the buffer ct_last_error returns */
        snprintf(why, sizeof why, "%s", ct_last_error());
        return core_err(s, "%s: %s", who, why);
    }
    char *real = realpath(path, NULL); /* NULL when the target does not exist yet */
    const char *target = real ? real : path;
    char *dir = dir_of(target);
    size_t tlen = dir ? strlen(dir) + 32 : 0;
    char *tmp = dir ? malloc(tlen) : NULL;
    int fd = -1;
    if (!tmp) {
        s = core_err(CT_ERR_OOM, "%s: out of memory", who);
    } else {
        snprintf(tmp, tlen, "%s/.ctorch-tmp-XXXXXX", dir);
        fd = mkstemp(tmp);
        if (fd < 0)
            s = core_err(CT_ERR_IO, "%s: cannot create a temporary file in '%s' for '%s': %s", who, dir, path,
                         strerror(errno));
    }
    if (s == CT_OK) {
        const char *step = "writing";
        bool ok = fchmod(fd, new_file_mode(target)) == 0;
        if (ok) ok = fill(fd, ctx);
        else step = "setting the mode of";
        if (ok && !(ok = fsync(fd) == 0)) step = "syncing";
        int e = errno;
        if (close(fd) != 0 && ok) ok = false, e = errno, step = "closing";
        if (ok && !(ok = rename(tmp, target) == 0)) e = errno, step = "renaming into place";
        if (!ok) {
            unlink(tmp);
            s = core_err(CT_ERR_IO, "%s: %s '%s' failed: %s (the previous file, if any, is unchanged)", who, step,
                         path, strerror(e));
        }
    }
    if (s == CT_OK) {
        /* make the rename itself durable; failure here loses nothing already written */
        int dfd = open(dir, O_RDONLY | O_DIRECTORY);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
    free(tmp);
    free(dir);
    free(real);
    return s;
}
