/* The forms of the LSTM cell a recurrence kernel compiles (kernel.cell; the
 * value is the cluster kernel's CELL macro, the tensor-core kernel's TC_CELL).
 * C and CUDA: the kernel families' option tables (src/lstm) take the words,
 * kernels/lstm_cell.cuh the forms. */
#ifndef SPK_LSTM_CELL_FORMS_CUH
#define SPK_LSTM_CELL_FORMS_CUH

enum {
    SPK_CELL_REFERENCE = 0, /* the persistent kernel's and the baseline's */
    SPK_CELL_TRIMMED = 1,   /* fewer dependent instructions, the same bits for every input */
    SPK_CELL_FUSED = 2,     /* the bias added to x·Wᵀ off the step's chain, the tanh polynomial in FMAs: other
                               bits, within the FP32 bound */
};
/* kernel.cell's words, value i the i-th */
#define SPK_CELL_WORDS "reference", "trimmed", "fused"
/* kernel.cell's help line */
#define SPK_CELL_HELP                                                                                                  \
    "the cell's instructions: the reference's, trimmed (the same bits), or fused (the bias added early, FMAs: within " \
    "the FP32 bound)"

#endif
