/* Files written so that a user's data is never lost: the content goes to a
 * temporary file in the target's folder, is synced, and is renamed over the
 * target only when complete. A failure (full disk, a cancel, a killed process)
 * leaves an existing file as it was and removes the temporary file. */
#ifndef CT_FORMATS_ATOMIC_FILE_H
#define CT_FORMATS_ATOMIC_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "ctorch/core.h"

/* Writes the content to fd; false with errno set on failure. */
typedef bool (*formats_fill_fn)(int fd, void *ctx);

/* Atomically creates or replaces path with what fill writes. A symlink at path
 * is followed (its target is replaced); the new file gets the replaced file's
 * mode, or 0666 less the umask. `who` prefixes error messages ("gguf writer"). */
ct_status formats_atomic_write(const char *path, formats_fill_fn fill, void *ctx, const char *who);

/* write(2) until all n bytes are written, retrying short writes and EINTR. */
bool formats_write_all(int fd, const void *buf, size_t n);

/* Checks, before any work, that out_path can be written: its folder exists and
 * it is not a folder, nor (when in_path is given) the same file as in_path
 * under another name (same device and inode: ./x, a symlink or a hard link).
 * CT_ERR_IO for a missing folder, CT_ERR_INVALID_ARG otherwise. */
ct_status formats_check_output(const char *out_path, const char *in_path);

#endif
