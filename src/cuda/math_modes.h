/* The maths of spk's products, one list: each entry X(NAME, "name", where,
 * HELD_TO, "what it is") in the order spk_math_mode numbers them. `where`
 * says which products take it: SPK_MATH_STACKS, the input projections of the
 * GPU recurrence stacks (the built-in kernels, a kernel of one's own, "auto");
 * SPK_MATH_CUDNN, cuDNN's LSTM; every math is spk.blas.gemm's. HELD_TO is the
 * math whose accuracy bounds and fastest cuDNN algorithm a stack row of this
 * math is compared with (spk.benchmark). Everything that names a math reads
 * it from here: spk_math_mode, spk_math_mode_from_name and its message, the
 * stacks' check, the plans' variant text, spk.core.blas.math_modes for the
 * Lua side (spk.lstm.check_math, spk.benchmark, spk bench --math) and the
 * help texts; tests/spec/vocabulary_spec.lua checks that no other file
 * spells the names. */
#ifndef SPK_CUDA_MATH_MODES_H
#define SPK_CUDA_MATH_MODES_H

#define SPK_MATH_STACKS 1u
#define SPK_MATH_CUDNN 2u

/* TF32's name stands alone too: the tensor-core recurrence's 3xTF32 split is named after its parts. */
#define SPK_MATH_TF32_NAME "tf32"

#define SPK_MATH_MODES(X)                                                                                              \
    X(FP32, "fp32", SPK_MATH_STACKS | SPK_MATH_CUDNN, FP32, "IEEE FP32 products and sums (the default)")              \
    X(TF32, SPK_MATH_TF32_NAME, SPK_MATH_STACKS | SPK_MATH_CUDNN, TF32, "tensor cores, TF32 inputs, FP32 sums")       \
    X(PEDANTIC, "pedantic", 0u, FP32, "cuBLAS's FP32 without reduced-precision shortcuts")                           \
    X(3XTF32, "3xtf32", SPK_MATH_STACKS, FP32, "tensor cores, split-TF32 operands with FP32's accuracy, FP32 sums")

#define SPK_MATH_ENUM(NAME, name, where, held_to, help) SPK_MATH_##NAME,
typedef enum spk_math_mode { SPK_MATH_MODES(SPK_MATH_ENUM) SPK_MATH_COUNT } spk_math_mode;
#undef SPK_MATH_ENUM

/* The names, in the list's order, NULL-terminated. */
extern const char *const spk_math_mode_names[];
/* The mode of a name, or -1 with "math must be "fp32", "tf32", "pedantic"
 * or "3xtf32", got "x"". */
int spk_math_mode_from_name(const char *name, spk_math_mode *out);
/* Its name, "unknown" for a value out of the list. */
const char *spk_math_mode_name(spk_math_mode math);
/* Its `where` (SPK_MATH_STACKS, SPK_MATH_CUDNN), 0 out of the list. */
unsigned spk_math_mode_where(spk_math_mode math);
/* Its HELD_TO and its one line of help. */
spk_math_mode spk_math_mode_held_to(spk_math_mode math);
const char *spk_math_mode_help(spk_math_mode math);
/* The names a product takes (those whose `where` has every bit of `where`;
 * 0: all) as a message lists them: "\"fp32\", \"tf32\" or \"3xtf32\"". */
void spk_math_mode_choices(unsigned where, char *out, size_t size);

#endif
