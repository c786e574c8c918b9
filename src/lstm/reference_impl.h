/* The reference's work in one precision on one vector unit. Included by
 * reference.c once per pair with IS_DOUBLE (1: double, 0: float), LANES
 * (values a vector), ROWS (batch rows a register block), SUFFIX, VFMA and
 * KEEP defined, inside the vector unit's target; IS_DOUBLE, LANES and SUFFIX
 * are undefined at the end. Not a header of its own. The order of every sum
 * is lstm.h's (Numerics); nothing here depends on which thread runs which
 * part.
 *
 * Layouts. A thread owns a range of unit chunks of its direction: chunk c
 * holds units c·LANES .. c·LANES + LANES − 1 (past H: zero weights, never
 * stored), and its four gates' columns sit side by side, one vector each
 * (i, o, f, c), so the products of a chunk and a batch row end in four
 * vectors that the cell consumes at once:
 *   Wp [chunks][K][4·LANES], Rp [chunks][H][4·LANES], bias [chunks][4·LANES]
 *   G  [chunks][steps of a slab][rows][4·LANES]   x·Wᵀ of the slab's steps
 *   c  [rows][chunks][LANES]                     the cell state
 * The team's h is [2][rows][H]: step s reads h[s % 2] and writes h[(s+1) % 2]. */

#if IS_DOUBLE
#define REAL double
#define UINT uint64_t
#else
#define REAL float
#define UINT uint32_t
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SUFFIX)

typedef REAL FN(vr_) __attribute__((vector_size(LANES * sizeof(REAL))));
typedef UINT FN(vi_) __attribute__((vector_size(LANES * sizeof(REAL))));
#define VR FN(vr_)
#define VI FN(vi_)
#define GATES (4 * LANES)
#define MADD(a, b, c) VFMA((a) - (VR){0}, b, c) /* a a scalar, in every lane */

#define MATH_DOUBLE IS_DOUBLE
#define MATH_REAL REAL
#define MATH_V VR
#define MATH_I VI
#define MATH_FN(name) CAT(name, SUFFIX)
#define MATH_AS_I(v) ((VI)(v))
#define MATH_AS_V(i) ((VR)(i))
#define MATH_MASK(cmp) ((VI)(cmp))
#define MATH_SPLAT(c) ((REAL)(c) - (VR){0})
#define MATH_FMA(a, b, c) VFMA(a, b, c)
#include "lstm/cpu_math_impl.h"

/* acc[r][j] = Σ_k a[r][k] · panel_{j/4}[k][(j%4)·LANES ..], k = 0 .. K-1 in
 * order, one fused multiply-add a term (MADD), from zero or, to go on with a
 * sum over a first part of its terms, from acc itself (`more`): the order
 * of lstm.h either way. `mr` rows and `nc` chunks (panels) at once; both are
 * constants where this is inlined, so the accumulators stay in registers.
 * KEEP holds a k's panel vectors in registers for all the rows (left alone,
 * GCC folds their loads into each row's multiply-add, a load each). */
static inline __attribute__((always_inline)) void FN(block_)(const int mr, const int nc, const REAL *const *a,
                                                             const REAL *const *panel, int64_t K, bool more,
                                                             VR acc[ROWS][8])
{
    VR s[ROWS][8];
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; r++)
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            s[r][j] = more && r < mr && j < 4 * nc ? acc[r][j] : (VR){0};
    const REAL *p0 = panel[0], *p1 = nc > 1 ? panel[1] : panel[0];
    for (int64_t k = 0; k < K; k++) {
        const VR *b0 = (const VR *)(p0 + k * GATES), *b1 = (const VR *)(p1 + k * GATES);
        VR b[8] = {b0[0], b0[1], b0[2], b0[3]};
        if (nc > 1)
            b[4] = b1[0], b[5] = b1[1], b[6] = b1[2], b[7] = b1[3];
        if (mr > 1 && nc == 1)
            KEEP(b[0], b[1], b[2], b[3]);
#pragma GCC unroll 8
        for (int r = 0; r < ROWS; r++)
            if (r < mr) {
                REAL v = a[r][k];
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++)
                    if (j < 4 * nc)
                        s[r][j] = MADD(v, b[j], s[r][j]);
            }
    }
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; r++)
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            if (r < mr && j < 4 * nc)
                acc[r][j] = s[r][j];
}

/* block_ with mr and nc constants in each case. */
static void FN(block_any_)(int mr, int nc, const REAL *const *a, const REAL *const *panel, int64_t K, bool more,
                           VR acc[ROWS][8])
{
    switch (mr * 2 + (nc > 1)) {
#if ROWS >= 4
    case 8: FN(block_)(4, 1, a, panel, K, more, acc); break;
    case 6: FN(block_)(3, 1, a, panel, K, more, acc); break;
    case 5: FN(block_)(2, 2, a, panel, K, more, acc); break;
#endif
    case 4: FN(block_)(2, 1, a, panel, K, more, acc); break;
    case 3: FN(block_)(1, 2, a, panel, K, more, acc); break;
    default: FN(block_)(1, 1, a, panel, K, more, acc); break;
    }
}

/* The packed weights of one direction for the thread's chunks (once per
 * layer and direction it runs). */
static void FN(pack_)(const struct ref_plan *p, int k, int d, struct ref_thread *me)
{
    if (me->packed_layer == k && me->packed_dir == d)
        return;
    const int64_t H = p->hidden, K = p->input[k], N = 4 * H;
    const REAL *W = (const REAL *)p->W[k] + d * N * K, *R = (const REAL *)p->R[k] + d * N * H;
    const REAL *B = (const REAL *)p->B[k] + d * 2 * N;
    REAL *Wp = me->Wp, *Rp = me->Rp, *bias = me->bias;
    for (int64_t c = 0; c < me->chunks; c++)
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < LANES; l++) {
                int64_t u = (me->chunk0 + c) * LANES + l, j = g * H + u, col = g * LANES + l;
                bool real = u < H;
                for (int64_t i = 0; i < K; i++)
                    Wp[(c * K + i) * GATES + col] = real ? W[j * K + i] : 0;
                for (int64_t i = 0; i < H; i++)
                    Rp[(c * H + i) * GATES + col] = real ? R[j * H + i] : 0;
                bias[c * GATES + col] = real ? B[j] + B[N + j] : 0;
            }
    me->packed_layer = k;
    me->packed_dir = d;
}

/* What one (team, thread) works on in a layer. */
struct FN(work_) {
    const struct ref_plan *p;
    struct ref_team *team;
    struct ref_thread *me;
    int k, d;
    int64_t K;
    const REAL *x; /* the layer's input [B, T, K] */
    REAL *y;       /* its output [B, T, 2H] */
    bool traced;
};

/* The inputs a projection block takes at once: its slice of a chunk's
 * panel (KB × 4 vectors) stays in the core's first-level cache while the
 * rows stream by; a sum goes on across slices from where it stopped (G holds
 * it between them), so its order is the same as in one pass. */
#define KB (16384 / (GATES * (int64_t)sizeof(REAL)))

/* G = x·Wᵀ for the team's rows at steps s0 .. s0 + n - 1 (in the direction's
 * order), the thread's chunks. */
static void FN(project_)(const struct FN(work_) *w, int64_t s0, int64_t n)
{
    const struct ref_plan *p = w->p;
    const struct ref_thread *me = w->me;
    const int64_t T = p->steps, K = w->K, rows = w->team->rows, b0 = w->team->row0, m_all = rows * n;
    REAL *G = me->G;
    VR acc[ROWS][8];
    for (int64_t k0 = 0; k0 < K; k0 += KB) {
        const int64_t kn = K - k0 < KB ? K - k0 : KB;
        for (int64_t c = 0; c < me->chunks; c++) {
            const REAL *panel = (const REAL *)me->Wp + (c * K + k0) * GATES;
            for (int64_t m = 0; m < m_all; m += ROWS) {
                int mr = (int)(m_all - m < ROWS ? m_all - m : ROWS);
                const REAL *a[ROWS];
                VR *g[ROWS];
                for (int r = 0; r < mr; r++) {
                    int64_t row = (m + r) % rows, s = s0 + (m + r) / rows, t = w->d ? T - 1 - s : s;
                    a[r] = w->x + ((b0 + row) * T + t) * K + k0;
                    g[r] = (VR *)(G + (c * m_all + m + r) * GATES);
                    if (k0 > 0)
                        acc[r][0] = g[r][0], acc[r][1] = g[r][1], acc[r][2] = g[r][2], acc[r][3] = g[r][3];
                }
                FN(block_any_)(mr, 1, a, &panel, kn, k0 > 0, acc);
                for (int r = 0; r < mr; r++)
                    g[r][0] = acc[r][0], g[r][1] = acc[r][1], g[r][2] = acc[r][2], g[r][3] = acc[r][3];
            }
        }
    }
}

/* Stores the lanes of v that are units of the layer (u0 .. H - 1). */
static inline void FN(store_units_)(REAL *to, VR v, int64_t u0, int64_t H)
{
    if (u0 + LANES <= H) {
        memcpy(to, &v, sizeof v);
        return;
    }
    for (int l = 0; u0 + l < H; l++)
        to[l] = v[l];
}

/* The cell of one batch row (team row r) and chunk c at step s of the slab
 * starting at s0: pre = (x·Wᵀ + h·Rᵀ) + bias, then c and h (lstm.h). */
static inline void FN(cell_)(const struct FN(work_) *w, const VR acc[4], int64_t r, int64_t c, int64_t s, int64_t s0,
                             int64_t n, REAL *h_next)
{
    const struct ref_plan *p = w->p;
    struct ref_thread *me = w->me;
    const int64_t H = p->hidden, T = p->steps, b = w->team->row0 + r, u0 = (me->chunk0 + c) * LANES;
    const VR *g = (const VR *)((const REAL *)me->G + ((c * n + (s - s0)) * w->team->rows + r) * GATES);
    const VR *bias = (const VR *)((const REAL *)me->bias + c * GATES);
    VR *cell = (VR *)((REAL *)me->c + (r * me->chunks + c) * LANES);
    VR ig = FN(sigmoid_)((g[0] + acc[0]) + bias[0]);
    VR og = FN(sigmoid_)((g[1] + acc[1]) + bias[1]);
    VR fg = FN(sigmoid_)((g[2] + acc[2]) + bias[2]);
    VR cand = FN(tanh_)((g[3] + acc[3]) + bias[3]);
    VR cv = VFMA(fg, *cell, ig * cand);
    *cell = cv;
    VR hv = og * FN(tanh_)(cv);
    int64_t t = w->d ? T - 1 - s : s;
    FN(store_units_)(h_next + r * H + u0, hv, u0, H);
    FN(store_units_)(w->y + (b * T + t) * 2 * H + w->d * H + u0, hv, u0, H);
    if (w->traced)
        for (int e = 0; e < p->trace_count; e++)
            if (p->trace_steps[e] == t) {
                FN(store_units_)((REAL *)p->trace_h + (e * p->batch + b) * H + u0, hv, u0, H);
                FN(store_units_)((REAL *)p->trace_c + (e * p->batch + b) * H + u0, cv, u0, H);
            }
}

/* Step s of the recurrence for the thread's chunks and the team's rows. */
static void FN(step_)(const struct FN(work_) *w, int64_t s, int64_t s0, int64_t n)
{
    const int64_t H = w->p->hidden, rows = w->team->rows;
    const REAL *h = w->team->h[s & 1];
    REAL *h_next = w->team->h[(s + 1) & 1];
    const bool pairs = 2 * rows <= ROWS; /* every block has mr = rows: two chunks a block */
    VR acc[ROWS][8];
    for (int64_t c = 0; c < w->me->chunks;) {
        const int nc = pairs && c + 1 < w->me->chunks ? 2 : 1;
        const REAL *panel[2] = {(const REAL *)w->me->Rp + c * H * GATES, (const REAL *)w->me->Rp + (c + 1) * H * GATES};
        for (int64_t r = 0; r < rows; r += ROWS) {
            int mr = (int)(rows - r < ROWS ? rows - r : ROWS);
            const REAL *a[ROWS];
            for (int i = 0; i < mr; i++)
                a[i] = h + (r + i) * H;
            FN(block_any_)(mr, nc, a, panel, H, false, acc);
            for (int i = 0; i < mr; i++)
                for (int j = 0; j < nc; j++)
                    FN(cell_)(w, &acc[i][4 * j], r + i, c + j, s, s0, n, h_next);
        }
        c += nc;
    }
}

/* One layer of one team as seen by one of its threads; `team_barrier` when
 * the team has more than one. Returns whether to stop (cancellation; with a
 * team barrier, all of the team's threads return it at the same step). */
static bool FN(run_team_)(const struct ref_plan *p, int k, struct ref_team *team, struct ref_thread *me,
                          spk_cpu_barrier *team_barrier)
{
    const int64_t T = p->steps, H = p->hidden;
    struct FN(work_) w = {
        .p = p, .team = team, .me = me, .k = k, .d = team->d, .K = p->input[k],
        .x = (const REAL *)p->in[k], .y = (REAL *)p->out[k],
        .traced = p->trace_count > 0 && p->trace_layer == k && p->trace_direction == team->d,
    };
    FN(pack_)(p, k, team->d, me);
    memset(me->c, 0, (size_t)(team->rows * me->chunks * LANES) * sizeof(REAL));
    REAL *h0 = team->h[0];
    for (int64_t r = 0; r < team->rows; r++)
        for (int64_t u = me->chunk0 * LANES; u < (me->chunk0 + me->chunks) * LANES && u < H; u++)
            h0[r * H + u] = 0;
    double since = p->profiled ? clock_ms() : 0;
    if (team_barrier && spk_cpu_barrier_wait(team_barrier, false))
        return true;
    lap(p, &since, &me->wait_ms);
    for (int64_t s0 = 0; s0 < T; s0 += p->slab_steps) {
        int64_t n = T - s0 < p->slab_steps ? T - s0 : p->slab_steps;
        if (!team_barrier && spk_cancel_requested())
            return true;
        FN(project_)(&w, s0, n);
        lap(p, &since, &me->project_ms);
        for (int64_t s = s0; s < s0 + n; s++) {
            FN(step_)(&w, s, s0, n);
            lap(p, &since, &me->step_ms);
            if (team_barrier && spk_cpu_barrier_wait(team_barrier, spk_cancel_requested()))
                return true;
            lap(p, &since, &me->wait_ms);
        }
    }
    return false;
}

/* A thread's part of the whole stack: layer after layer, every thread
 * meeting the others between them (a layer reads all of the previous one's
 * output). */
static void FN(worker_)(void *arg, int index)
{
    struct ref_plan *p = arg;
    struct ref_thread *me = &p->workers[index];
    bool stop = false;
    for (int k = 0; k < p->layers; k++) {
        if (!stop && p->team_size == 1) {
            for (int64_t i; !stop && (i = atomic_fetch_add(&p->next_team[k], 1)) < p->team_count;)
                stop = FN(run_team_)(p, k, &p->teams[i], me, NULL);
        } else if (!stop && me->team >= 0) {
            struct ref_team *team = &p->teams[me->team];
            stop = FN(run_team_)(p, k, team, me, &team->barrier);
        }
        double since = p->profiled ? clock_ms() : 0;
        stop = spk_cpu_barrier_wait(&p->all, stop || spk_cancel_requested());
        lap(p, &since, &me->wait_ms);
        if (stop)
            break;
    }
}

#undef REAL
#undef UINT
#undef IS_DOUBLE
#undef LANES
#undef SUFFIX
#undef VR
#undef VI
#undef GATES
#undef KB
#undef MADD
#undef FN
#undef CAT
#undef CAT_
