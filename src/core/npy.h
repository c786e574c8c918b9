/* NumPy .npy files: format versions 1.0 to 3.0, little-endian <f4 <f8 <i4 <u8,
 * C order (Fortran order is read and transposed into C order). Malformed,
 * truncated or lying files are refused with a message naming the file and the
 * problem, before any allocation the file's size cannot justify. */
#ifndef SPK_NPY_H
#define SPK_NPY_H

#include <stddef.h>

#include "core/tensor.h"

spk_tensor *spk_npy_load(const char *path);
/* Parses an in-memory image; `name` is used in messages. */
spk_tensor *spk_npy_parse(const void *bytes, size_t size, const char *name);
int spk_npy_save(const char *path, const spk_tensor *t); /* writes version 1.0 */

#endif
