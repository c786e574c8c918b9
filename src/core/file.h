/* Reading the files spk is given. Every reader in spk (tensor files, weight
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

/* spk_file_open, as a stdio stream ("rb"); NULL and a message on failure. */
FILE *spk_file_fopen(const char *path, struct stat *st);

/* Reads what is left of `fd`, at most `limit` bytes, into a malloc'd buffer
 * with a NUL after the data (length in *len). More than `limit` bytes is an
 * error: "<name>: larger than the <limit> limit for <what>". */
char *spk_file_read_fd(int fd, const char *name, size_t limit, const char *what, size_t *len);

/* spk_file_open and spk_file_read_fd: the whole file, bounded. */
char *spk_file_read(const char *path, size_t limit, const char *what, size_t *len);

/* The limit in words: "16 MiB", "4 KiB", "100 bytes". */
void spk_file_size_words(size_t bytes, char *out, size_t size);

#endif
