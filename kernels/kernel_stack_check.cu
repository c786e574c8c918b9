// The write check of a stack around a recurrence kernel of one's own
// (src/lstm/kernel_stack.c, docs/kernels.md): before a layer's launches the
// plan fills the output with a poison, a float of all ones (a NaN that no
// arithmetic produces: the GPU's NaN results are 0x7fffffff), and after them
// counts what is left of it and which other non-finite values (NaN, Inf) the
// kernel wrote; the same count over x says whether the input was finite.

#define SPK_POISON 0xffffffffu

// y[0 .. n) = the poison.
extern "C" __global__ void spk_kernel_stack_poison(unsigned *y, unsigned long long n)
{
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        y[i] = SPK_POISON;
}

// out[0]: words still holding the poison, out[1]: n - the first one's index
// (0: none); out[2], out[3]: the same for the other non-finite values. The
// host zeroes out before a pass, so the firsts are maxima of n - index.
extern "C" __global__ void spk_kernel_stack_count(const unsigned *y, unsigned long long n, unsigned long long *out)
{
    unsigned long long poison = 0, nan = 0, first_poison = 0, first_nan = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const unsigned w = y[i];
        if (w == SPK_POISON) {
            poison++;
            if (first_poison == 0)
                first_poison = n - i;
        } else if ((w & 0x7f800000u) == 0x7f800000u) {
            nan++;
            if (first_nan == 0)
                first_nan = n - i;
        }
    }
    if (poison) {
        atomicAdd(&out[0], poison);
        atomicMax(&out[1], first_poison);
    }
    if (nan) {
        atomicAdd(&out[2], nan);
        atomicMax(&out[3], first_nan);
    }
}
