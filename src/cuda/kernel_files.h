/* The files the kernel compiler reads, and the kernel cache's entry format:
 * plain C (no CUDA), so the fuzz targets exercise exactly what spk_compile
 * runs. Internal to src/cuda (nvrtc.c). */
#ifndef SPK_CUDA_KERNEL_FILES_H
#define SPK_CUDA_KERNEL_FILES_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Kernel sources and their includes are text of a few hundred KB at most;
 * a larger one (or /dev/zero behind a link) is refused, not read until
 * memory runs out. */
#define SPK_SOURCE_MAX ((size_t)16 << 20)
/* Distinct files #included by one compile, and their nesting. */
#define SPK_INCLUDES_MAX 256
#define SPK_INCLUDE_DEPTH_MAX 32
/* Include folders: the source's, the kernel folder, then -I options. */
#define SPK_INCLUDE_DIRS_MAX 16

/* A growing byte buffer, always NUL-terminated. */
typedef struct spk_buffer {
    char *data;
    size_t len, cap;
} spk_buffer;

int spk_buffer_add(spk_buffer *b, const void *data, size_t len);
/* A length-prefixed field ("tag len\n" data "\n"), so that no two inputs
 * hash alike by shifting text from one field into the next. */
int spk_buffer_field(spk_buffer *b, const char *tag, const void *data, size_t len);

/* A source or include: a regular file of at most SPK_SOURCE_MAX bytes
 * without a NUL (NVRTC would stop reading there, and compile less than was
 * hashed). `what` names it in the size message ("a kernel source"). */
char *spk_kernel_source_read(const char *path, const char *what, size_t *len);

/* dirname(3) into out, never failing: "." for a bare name. */
void spk_dirname(const char *path, char *out, size_t size);

typedef struct spk_include_path {
    char dirs[SPK_INCLUDE_DIRS_MAX][PATH_MAX];
    int n;
} spk_include_path;

/* Appends a folder (an empty one is skipped); more than the bound, or one
 * longer than PATH_MAX, is an error. */
int spk_include_path_add(spk_include_path *ip, const char *dir);

/* Adds to `key` the content of every file that `#include "name"` or
 * `#include <name>` in `source` finds (quoted ones first in `from_dir`, the
 * including file's folder, when given; then in ip's folders), recursively,
 * each once; a quoted name found nowhere is recorded as missing, an angle
 * one is the toolkit's. Every file is read with spk_kernel_source_read.
 * Errors name the #include and the file. */
int spk_hash_includes(spk_buffer *key, const char *source, const char *from_dir, const spk_include_path *ip);

/* ---- cache entries --------------------------------------------------- */

#define SPK_ENTRY_MAGIC "SPKCACHE"
#define SPK_ENTRY_HEADER 88
#define SPK_ENTRY_VERSION 2u
/* Cubins of spk's kernels are a few hundred KB; an entry above this is no
 * entry the cache wrote and is not read. */
#define SPK_ENTRY_MAX ((size_t)64 << 20)
#define SPK_KEY_HEX 64

/* The header of an entry for `code` made for `key`. */
void spk_entry_header(uint8_t header[SPK_ENTRY_HEADER], const uint8_t key[32], bool ptx, const void *code,
                      size_t bytes);

typedef enum {
    SPK_ENTRY_OK = 0,
    SPK_ENTRY_CORRUPT,   /* short, bad magic, other version or kind, bad length or checksum */
    SPK_ENTRY_OTHER_KEY, /* a whole entry, made for another key */
} spk_entry_status;

/* Checks `len` bytes as an entry of kind `ptx` made for `key`; on OK the
 * payload is at data + SPK_ENTRY_HEADER, *bytes long. */
spk_entry_status spk_entry_check(const void *data, size_t len, const uint8_t key[32], bool ptx, size_t *bytes);

/* "<64 lowercase hex>.bin", the only names the cache writes, and its
 * temporary files "<64 hex>.bin.tmp.<pid>.<thread hex>". */
bool spk_is_entry_name(const char *name);
bool spk_is_entry_temp_name(const char *name);

#endif
