/* Reading and writing files. Every reader in spk (tensor files, weight
 * folders, kernel sources and their includes, kernel-cache entries, tuning
 * records) opens files here, so that none can block or read without bound:
 *
 *   - the path is opened with O_NONBLOCK, so a FIFO without a writer or a
 *     device never stalls open(); the descriptor is O_CLOEXEC;
 *   - it must be a regular file (checked on the open descriptor, after a
 *     first check of the path that avoids opening devices at all) before a
 *     byte is read; a folder, FIFO, socket or device is refused, also behind
 *     a symbolic link;
 *   - whole-file reads stop at a limit the caller gives, and a file longer
 *     than that is an error naming the file and the limit (a regular file can
 *     still grow while it is read, and /proc files report size 0).
 *
 * Messages name the file: "<name>: not a regular file (a FIFO)",
 * "<name>: cannot open: No such file or directory",
 * "<name>: larger than the 16 MiB limit for a kernel source". */
#ifndef SPK_FILE_H
#define SPK_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>

/* What a file of this mode is, in words, for messages ("a folder", "a FIFO",
 * "a character device", ...). */
const char *spk_file_kind(mode_t mode);

/* Opens `path` (relative to the folder descriptor `dir`, or AT_FDCWD) for
 * reading. Returns a descriptor of a regular file, in blocking mode, with its
 * status in *st where st is not NULL; or -1 and a message naming `shown`
 * (NULL: the path). */
int spk_file_openat(int dir, const char *path, const char *shown, struct stat *st);
int spk_file_open(const char *path, struct stat *st);

/* spk_file_open, for a file named inside a model (ONNX external data): the
 * file it opens must lie, once every symbolic link of the path (the file's,
 * or a folder's on the way) is resolved, inside one of the `nroots` folders
 * `roots` (resolved too). The check is made on the descriptor: the resolved
 * path must name the very file opened, so a link swapped in between is
 * refused as well. `what` names the folders in the message:
 * "<path>: resolves to <real path>, outside <what> (<root>)". */
int spk_file_open_within(const char *path, const char *const *roots, int nroots, const char *what, struct stat *st);

/* spk_file_open, as a stdio stream ("rb"); NULL and a message on failure. */
FILE *spk_file_fopen(const char *path, struct stat *st);

/* Reads what is left of `fd`, at most `limit` bytes, into a malloc'd buffer
 * with a NUL after the data (length in *len). More than `limit` bytes is an
 * error: "<name>: larger than the <limit> limit for <what>". */
char *spk_file_read_fd(int fd, const char *name, size_t limit, const char *what, size_t *len);

/* spk_file_open and spk_file_read_fd: the whole file, bounded. */
char *spk_file_read(const char *path, size_t limit, const char *what, size_t *len);

/* ---- writing ------------------------------------------------------------
 * Every writer in spk (tensor files, ONNX models, tuning records, baselines,
 * results, spk test --init, the kernel cache) writes through these, so that
 * none can destroy what it did not make:
 *
 *   - the target must be absent or a regular file; a folder, FIFO, socket or
 *     device is refused at once, before anything is created ("<path>: not a
 *     regular file (a FIFO); spk writes only regular files"), so a write
 *     never blocks on a FIFO and never truncates a device;
 *   - a symbolic link is followed: the file it names is replaced, the link
 *     stays (a dangling link is refused);
 *   - the bytes go to a new temporary file beside the target (its folder,
 *     created exclusively, never following a link), flushed to the disk,
 *     and renamed over the target only once every byte is written: a failed
 *     write (a full disk) removes the temporary file and leaves the target
 *     as it was, the user's previous file whole;
 *   - a replaced file keeps its permission bits; a new one gets 0666 less
 *     the umask, as fopen gives.
 *
 * Messages name the target: "<path>: write failed: No space left on device
 * (<path> is unchanged)". */
typedef struct spk_file_out spk_file_out;

/* Starts writing `path`; NULL and a message on failure (nothing made). */
spk_file_out *spk_file_out_open(const char *path);
/* The same for the entry `name` of the folder descriptor `dir` (links not
 * followed: a link there is not a regular file), a new file created with
 * `mode` (less the umask); `shown` names it in messages (NULL: name). */
spk_file_out *spk_file_out_openat(int dir, const char *name, const char *shown, mode_t mode);
/* Whether `name` is a temporary file these functions make for the target
 * `target` (".<target>.spk-tmp-<pid>-<n>"), as a crashed writer leaves. */
bool spk_file_is_temporary(const char *name, const char *target);
/* Whether p is, to its end, a temporary name's tail: a process id
 * (decimal), `sep`, then a number written in `digits` ("0123456789abcdef":
 * hexadecimal). */
bool spk_file_pid_tail(const char *p, char sep, const char *digits);
/* The stream to write to. */
FILE *spk_file_out_stream(spk_file_out *out);
/* Finishes: flushes, syncs and renames the temporary file over the target;
 * on any failure (a write, the flush, the sync, the rename) removes it.
 * Frees `out`; 0, or -1 and a message. */
int spk_file_out_commit(spk_file_out *out);
/* Gives up: removes the temporary file, leaves the target; frees `out`. */
void spk_file_out_discard(spk_file_out *out);
/* The whole of data[0..size) as the file at `path`. */
int spk_file_write(const char *path, const void *data, size_t size);

/* Removes the regular file (or symbolic link) at path, which a writer made:
 * a folder, FIFO or device is refused, naming what it is. 0 or -1 (spk_fail). */
int spk_file_remove(const char *path);

/* Makes the folder at path and every missing folder above it (as mkdir -p),
 * each with `mode` (less the umask); one already there is fine. Something
 * else in the way (a file, a FIFO) is refused, naming that prefix and what it
 * is. `made`, when given, is set when path itself was made by this call.
 * 0 or -1 (spk_fail). */
int spk_folder_make(const char *path, mode_t mode, bool *made);
/* Removes the empty folder at path (one spk made); anything else is refused,
 * naming what it is. 0 or -1 (spk_fail). */
int spk_folder_remove_empty(const char *path);

/* The limit in words: "16 MiB", "4 KiB", "100 bytes". */
void spk_file_size_words(size_t bytes, char *out, size_t size);

#endif
