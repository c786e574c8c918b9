/* The reference recurrence in one precision. Included by reference.c once per
 * precision with REAL (float or double), LANES (values per 16-byte vector),
 * SUFFIX, EXP and TANH defined; not a header of its own.
 *
 * Every dot product is summed from zero in index order, one separately rounded
 * multiply and add per term (no FMA: C11 mode turns contraction off). Speed
 * comes from computing many independent outputs at once: a vector lane per
 * output j, eight vectors per block, so each lane keeps the plain sequential
 * order and the result does not depend on the vector width. */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SUFFIX)

typedef REAL FN(vec_) __attribute__((vector_size(16)));
#define VEC FN(vec_)
#define BLOCK (8 * LANES)

/* out[j] = sum_k v[k] * M[k*N + j] for j in [j0, j0 + BLOCK). M rows are
 * vector-aligned (N is a multiple of LANES and M is 64-byte aligned). */
static inline void FN(dot_block_)(const REAL *v, int64_t K, const REAL *M, int64_t N, int64_t j0, REAL *out)
{
    VEC a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
    const REAL *m = M + j0;
    for (int64_t k = 0; k < K; k++, m += N) {
        const VEC *row = (const VEC *)m;
        VEC s = v[k] - (VEC){0}; /* broadcast; x - 0 is x, -0 included */
        a0 += s * row[0];
        a1 += s * row[1];
        a2 += s * row[2];
        a3 += s * row[3];
        a4 += s * row[4];
        a5 += s * row[5];
        a6 += s * row[6];
        a7 += s * row[7];
    }
    VEC *o = (VEC *)(out + j0);
    o[0] = a0, o[1] = a1, o[2] = a2, o[3] = a3, o[4] = a4, o[5] = a5, o[6] = a6, o[7] = a7;
}

static inline void FN(dot_vector_)(const REAL *v, int64_t K, const REAL *M, int64_t N, int64_t j0, REAL *out)
{
    VEC a = {0};
    const REAL *m = M + j0;
    for (int64_t k = 0; k < K; k++, m += N)
        a += (v[k] - (VEC){0}) * *(const VEC *)m;
    *(VEC *)(out + j0) = a;
}

/* out[j] = v · M[:, j] for every j < N. */
static void FN(matvec_)(const REAL *v, int64_t K, const REAL *M, int64_t N, REAL *out)
{
    int64_t j = 0;
    for (; j + BLOCK <= N; j += BLOCK)
        FN(dot_block_)(v, K, M, N, j, out);
    for (; j < N; j += LANES)
        FN(dot_vector_)(v, K, M, N, j, out);
}

/* G[t][j] = x[t] · Wt[:, j] for every step: column blocks outermost, so one
 * block's slab of Wt (K x BLOCK) stays in cache across all T steps. Stops
 * early (G incomplete) when cancellation is requested, polled per block. */
static void FN(project_)(const REAL *x, int64_t T, int64_t K, const REAL *Wt, int64_t N, REAL *G)
{
    int64_t j = 0;
    for (; j + BLOCK <= N; j += BLOCK) {
        if (spk_cancel_requested())
            return;
        for (int64_t t = 0; t < T; t++)
            FN(dot_block_)(x + t * K, K, Wt, N, j, G + t * N);
    }
    for (; j < N; j += LANES) {
        if (spk_cancel_requested())
            return;
        for (int64_t t = 0; t < T; t++)
            FN(dot_vector_)(x + t * K, K, Wt, N, j, G + t * N);
    }
}

static inline REAL FN(sigmoid_)(REAL v)
{
    return (REAL)1 / ((REAL)1 + EXP(-v));
}

/* One (batch row, direction) item of one layer. Polls cancellation once per
 * step; a cancelled item leaves its output incomplete (the caller discards it). */
static void FN(run_item_)(const struct layer_job *job, int64_t b, int d, struct scratch *s)
{
    const int64_t T = job->steps, K = job->input, H = job->hidden, N = 4 * H;
    const REAL *x = (const REAL *)job->in + b * T * K;
    const REAL *Wt = (const REAL *)job->Wt[d], *Rt = (const REAL *)job->Rt[d];
    const REAL *bias = (const REAL *)job->bias[d];
    REAL *G = s->gates, *acc = s->acc, *h = s->h, *c = s->c;
    REAL *y = (REAL *)job->out + b * T * 2 * H + d * H;
    bool traced = job->trace_count > 0 && job->trace_direction == d;

    FN(project_)(x, T, K, Wt, N, G);
    for (int64_t u = 0; u < H; u++)
        h[u] = c[u] = 0;
    for (int64_t step = 0; step < T && !spk_cancel_requested(); step++) {
        int64_t t = d ? T - 1 - step : step;
        FN(matvec_)(h, H, Rt, N, acc);
        const REAL *g = G + t * N;
        /* ONNX row blocks: i, o, f, c */
        for (int64_t u = 0; u < H; u++) {
            REAL pi = (g[u] + acc[u]) + bias[u];
            REAL po = (g[H + u] + acc[H + u]) + bias[H + u];
            REAL pf = (g[2 * H + u] + acc[2 * H + u]) + bias[2 * H + u];
            REAL pc = (g[3 * H + u] + acc[3 * H + u]) + bias[3 * H + u];
            REAL i = FN(sigmoid_)(pi), o = FN(sigmoid_)(po), f = FN(sigmoid_)(pf), cand = TANH(pc);
            c[u] = f * c[u] + i * cand;
            /* h is only read by the next step's matvec, so updating in place is safe */
            h[u] = o * TANH(c[u]);
        }
        REAL *yt = y + t * 2 * H;
        for (int64_t u = 0; u < H; u++)
            yt[u] = h[u];
        if (traced)
            for (int e = 0; e < job->trace_count; e++)
                if (job->trace_steps[e] == t) {
                    int64_t at = (e * job->batch + b) * H;
                    for (int64_t u = 0; u < H; u++) {
                        ((REAL *)job->trace_h)[at + u] = h[u];
                        ((REAL *)job->trace_c)[at + u] = c[u];
                    }
                }
    }
}

/* Transposes one direction of W [2, N, K] (already in this precision,
 * contiguous) into Wt [K, N], and sums the bias. */
static void FN(prepare_)(const REAL *W, int64_t N, int64_t K, REAL *Wt)
{
    for (int64_t j = 0; j < N; j++)
        for (int64_t k = 0; k < K; k++)
            Wt[k * N + j] = W[j * K + k];
}

static void FN(sum_bias_)(const REAL *B, int64_t N, REAL *bias)
{
    for (int64_t j = 0; j < N; j++)
        bias[j] = B[j] + B[N + j];
}

#undef VEC
#undef BLOCK
#undef FN
#undef CAT
#undef CAT_
