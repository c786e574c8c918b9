// Streamed gates' projecting blocks (kernel.streamed_gates 1 of
// kernels/lstm_cluster.cu): a layer's x·Wᵀ made inside the recurrence's own
// launch, by blocks after its tiles, instead of by a GEMM before it. Block
// (rank, tile `p` past the recurrence's, direction) projects the group of
// SPK_GATES_READY_ROWS packed gate rows p * CLUSTER + rank of its direction
// for every step, in the order the direction's recurrence takes them, and
// raises the group's ready count after each stage (kernels/spk_gates_ready.cuh).
// Its threads are halves of SPK_GATES_READY_ROWS rows x PROJECT_CHUNKS lanes:
// lane (row, chunk) holds its row's weights of every PROJECT_CHUNKS-th float4
// of the input in registers and sums them in order for PROJECT_X_ROWS rows of
// x at once, then the chunks' sums meet in a butterfly of shuffles: a fixed
// order, so the bits repeat (another order than cuBLAS's GEMM: other bits,
// within FP32's bound). The halves take turns over a stage's groups of rows;
// x's rows come into shared memory by cp.async SPK_PROJECT_STREAM_RING - 1
// stages ahead of the one summed. The launch is co-resident (the plan
// checks that all its clusters fit at once), so every wait on a count ends.
// Included inside lstm_cluster.cu's sm_90 section (it uses its HIDDEN and
// THREADS); the inputs are a runtime size of at most 2 * HIDDEN.
#ifndef SPK_LSTM_PROJECT_STAGES_CUH
#define SPK_LSTM_PROJECT_STAGES_CUH

#define PROJECT_CHUNKS 8
#define PROJECT_X_ROWS 8                                    /* rows of x a lane sums at once */
#define PROJECT_HALVES (THREADS / (SPK_GATES_READY_ROWS * PROJECT_CHUNKS))
#define PROJECT_MAX_FLOAT4S (2 * HIDDEN / 4)                /* an input of at most 2H features */
#define PROJECT_PER_CHUNK ((PROJECT_MAX_FLOAT4S + PROJECT_CHUNKS - 1) / PROJECT_CHUNKS)
#define PROJECT_GROUPS (4 * HIDDEN / SPK_GATES_READY_ROWS) /* ready counts a direction */
#define PROJECT_RING SPK_PROJECT_STREAM_RING

// x's rows of stage `st` (steps st * stage_steps ..., every batch row; row i
// of the stage is step i / batch, batch row i % batch) into `stage`; one
// commit group (empty past the last stage).
__device__ __forceinline__ void project_load_stage(float4 *stage, const float4 *x4, int float4s, int st,
                                                   int stage_steps, int batch, int steps, int direction, int tid)
{
    const int s0 = st * stage_steps;
    const int rows = max(0, min(stage_steps, steps - s0)) * batch;
    for (int i = tid; i < rows * float4s; i += THREADS) {
        const int row = i / float4s, k4 = i - row * float4s;
        const int s = s0 + row / batch, b = row - row / batch * batch;
        const int t = direction ? steps - 1 - s : s;
        copy_async16(stage + i, x4 + ((size_t)b * steps + t) * float4s + k4);
    }
    copy_async_commit();
}

// One projecting block: every step's x·Wᵀ of its group of rows into `gates`
// (this direction's [batch * steps, 4H]), its count raised after each stage.
__device__ __forceinline__ void project_gates(const float *__restrict__ x, const float *__restrict__ w, float *gates,
                                              unsigned *ready, int group, int inputs, int batch, int steps,
                                              int direction, int tid, float4 *stages)
{
    static_assert(THREADS % (SPK_GATES_READY_ROWS * PROJECT_CHUNKS) == 0,
                  "streamed gates need THREADS a multiple of 128 (halves of 16 rows x 8 lanes)");
    const int half = tid / (SPK_GATES_READY_ROWS * PROJECT_CHUNKS), chunk = tid % PROJECT_CHUNKS;
    const int row = group * SPK_GATES_READY_ROWS + (tid % (SPK_GATES_READY_ROWS * PROJECT_CHUNKS)) / PROJECT_CHUNKS;
    const int float4s = inputs / 4;
    const float4 *w4 = reinterpret_cast<const float4 *>(w + (size_t)row * inputs);
    float4 wv[PROJECT_PER_CHUNK];
#pragma unroll
    for (int j = 0; j < PROJECT_PER_CHUNK; j++) {
        const int k4 = chunk + j * PROJECT_CHUNKS;
        wv[j] = k4 < float4s ? __ldg(w4 + k4) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    float *out = gates + row;
    const int stage_steps = SPK_PROJECT_STREAM_STAGE_STEPS(batch);
    const int stage_floats4 = stage_steps * batch * float4s;
    const int count = (steps + stage_steps - 1) / stage_steps;
    for (int st = 0; st < PROJECT_RING - 1; st++)
        project_load_stage(stages + st * stage_floats4, x4, float4s, st, stage_steps, batch, steps, direction, tid);
    for (int st = 0; st < count; st++) {
        const float4 *stage = stages + (st % PROJECT_RING) * stage_floats4;
        const int ahead = st + PROJECT_RING - 1; // into the buffer the stage before this one freed
        project_load_stage(stages + (ahead % PROJECT_RING) * stage_floats4, x4, float4s, ahead, stage_steps, batch,
                           steps, direction, tid);
        copy_async_wait<PROJECT_RING - 1>();
        __syncthreads(); // every thread's copies of this stage have landed
        const int s0 = st * stage_steps;
        const int rows = min(stage_steps, steps - s0) * batch;
        for (int i0 = half * PROJECT_X_ROWS; i0 < rows; i0 += PROJECT_HALVES * PROJECT_X_ROWS) {
            float acc[PROJECT_X_ROWS];
#pragma unroll
            for (int r = 0; r < PROJECT_X_ROWS; r++)
                acc[r] = 0.0f;
#pragma unroll
            for (int j = 0; j < PROJECT_PER_CHUNK; j++) {
                const int k4 = chunk + j * PROJECT_CHUNKS;
                if (k4 < float4s) {
#pragma unroll
                    for (int r = 0; r < PROJECT_X_ROWS; r++) {
                        const float4 v = stage[min(i0 + r, rows - 1) * float4s + k4]; // past `rows`: not stored
                        acc[r] = fmaf(wv[j].x, v.x, acc[r]);
                        acc[r] = fmaf(wv[j].y, v.y, acc[r]);
                        acc[r] = fmaf(wv[j].z, v.z, acc[r]);
                        acc[r] = fmaf(wv[j].w, v.w, acc[r]);
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < PROJECT_X_ROWS; r++) {
                acc[r] += __shfl_xor_sync(FULL_MASK, acc[r], 4);
                acc[r] += __shfl_xor_sync(FULL_MASK, acc[r], 2);
                acc[r] += __shfl_xor_sync(FULL_MASK, acc[r], 1);
            }
            if (chunk == 0) {
                int s = s0 + i0 / batch, b = i0 - i0 / batch * batch; // one division a group
#pragma unroll
                for (int r = 0; r < PROJECT_X_ROWS; r++) {
                    if (i0 + r < rows) {
                        const int t = direction ? steps - 1 - s : s;
                        out[((size_t)b * steps + t) * 4 * HIDDEN] = acc[r];
                    }
                    if (++b == batch) {
                        b = 0;
                        s++;
                    }
                }
            }
        }
        // Every thread's gates of the stage written, and its buffer free for the next load; the count's
        // release store after the barrier makes them visible with it (the barrier orders them before it).
        __syncthreads();
        if (tid == 0)
            spk_gates_ready_store(ready + direction * PROJECT_GROUPS + group, (unsigned)min(steps, s0 + stage_steps));
    }
    copy_async_wait<0>(); // the empty groups past the end
}

// A block of the clusters after the launch's tiles (its blockIdx.y past
// them) projects its group of rows of its direction and returns true; a
// block of a tile returns false at once.
__device__ __forceinline__ bool projected_instead(const float *__restrict__ x, const float *__restrict__ w,
                                                  float *gates, unsigned *ready, int inputs, int batch, int steps,
                                                  int tile_rows, float4 *stages)
{
    if ((int)blockIdx.y * tile_rows < batch)
        return false;
    const int group = ((int)blockIdx.y - (batch + tile_rows - 1) / tile_rows) * CLUSTER + (int)cluster_rank();
    const int d = (int)blockIdx.z;
    if (group < PROJECT_GROUPS && inputs >= 4 && inputs <= 2 * HIDDEN && steps >= 1)
        project_gates(x, w + (size_t)d * 4 * HIDDEN * inputs, gates + (size_t)d * batch * steps * 4 * HIDDEN, ready,
                      group, inputs, batch, steps, d, (int)threadIdx.x, stages);
    return true;
}

#endif
