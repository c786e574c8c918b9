-- The rate of Hopper's warpgroup tensor-core instructions (wgmma) in the
-- shapes of spk's kernels: what a k-tile of the split-TF32 GEMM's
-- FP16 and TF32 forms, or a step's products in the tensor-core recurrence,
-- costs the tensor pipe, alone and with the FP16 form's own work on A beside
-- it. Each block (one an SM, on every SM at once) runs warpgroups that each
-- repeat a group of wgmmas with A from registers and B through a
-- shared-memory descriptor (K-major, the kernels' swizzles), then wait for
-- them. With "adds" a group is summed from zero into d and d is added into
-- an FP32 accumulator, as the kernels' slices do; without, every wgmma
-- accumulates into d (so none is dead code that ptxas may drop). The
-- "consumer" variants are the FP16 form's consumer warpgroups without TMA
-- or barriers (VARIANTS below says what each leaves in), laid out and
-- split by the kernel's own functions (kernels/gemm_3xtf32_tma.cuh). GPU
-- only (compute capability 9.0).
--
--   build/spk run tools/wgmma_rate.lua [--groups 2000] [--only NAMES] [--dry-run]
--
-- --groups: groups a warpgroup runs (even); --only: variants by name, with
-- commas between. Per variant: the instruction (m64nNk16 f16 or m64nNk8
-- tf32), warpgroups a block, wgmmas a group, adds or not; cycles a group
-- (one warpgroup's, the median over blocks and warpgroups, %clock64);
-- cycles an SM spends a wgmma (a block's cycles over all its warpgroups'
-- wgmmas); and the tensor pipe's share: the multiply-adds against the dense
-- rate (2,048 a clock an SM for f16, 1,024 for tf32). The last line
-- "wgmma_rate: N variants".
local spk = require "spk"

local options = require "spk.options"
local script = options.script { gpu = "required", dry_run = true,
  usage = "spk run tools/wgmma_rate.lua [--groups 2000] [--only NAMES] [--dry-run]" }

-- name, element type, N, warpgroups a block, wgmmas a group, adds after a
-- group, and "split": each group a k-tile of the FP16 form's consumer, its A
-- values loaded from a shared-memory tile (of four in turn, TMA's 128-byte
-- swizzle), split into FP16 parts in registers and fed to the three products
-- of its two k-steps (lo·B hi, hi·B lo, hi·B hi), as kernels/gemm_3xtf32_tma.cu
-- does; "ahead": the same, with the next group's A loaded and split while
-- this group's wgmmas run (before their wait); "arith": the split of
-- values made in registers, no loads; "loads": the loads, no split (A's raw
-- bits as the parts); "halves": a 64 x 256 tile a warpgroup, the split once
-- and its parts fed to two halves of 128 columns in turn, each with its own
-- wgmmas, wait and adds (the group column counts both halves' wgmmas);
-- "tiles": the split's k-tiles in tiles of 8 (K = 256), each tile ending in
-- the kernel's epilogue into shared memory (the warpgroup's 64 x 128 of C,
-- alpha times its sums, into its half of C's buffer, the proxy fence, its
-- named barrier before and after; no store to global memory); "tiles
-- offset": the same with the second warpgroup 4 k-tiles behind the first,
-- so that one's epilogue falls in the middle of the other's tile
local VARIANTS = {
  { "fp16 consumer k-tile", "f16", 128, 2, 6, true, "split" },
  { "fp16 consumer k-tile ahead", "f16", 128, 2, 6, true, "ahead" },
  { "fp16 consumer split only", "f16", 128, 2, 6, true, "arith" },
  { "fp16 consumer loads only", "f16", 128, 2, 6, true, "loads" },
  { "fp16 consumer 128x256 tile", "f16", 128, 2, 6, true, "halves" },
  { "fp16 consumer tiles", "f16", 128, 2, 6, true, "tiles" },
  { "fp16 consumer tiles offset", "f16", 128, 2, 6, true, "tiles offset" },
  { "fp16 k-tile", "f16", 128, 2, 6, true },
  { "fp16 k-tile no adds", "f16", 128, 2, 6, false },
  { "fp16 two k-tiles", "f16", 128, 2, 12, true },
  { "fp16 k-tile one warpgroup", "f16", 128, 1, 6, true },
  { "fp16 n256 no adds", "f16", 256, 2, 3, false },
  { "fp16 n256 x6 no adds", "f16", 256, 2, 6, false },
  { "fp16 n64", "f16", 64, 2, 6, true },
  { "tf32 k-tile", "tf32", 128, 2, 12, true },
  { "recurrence n8 slice", "f16", 8, 4, 12, true },
  { "recurrence n8 slice no adds", "f16", 8, 4, 12, false },
  { "recurrence n16 slice", "f16", 16, 4, 12, true },
  { "recurrence n8 two warpgroups", "f16", 8, 2, 12, true },
  { "recurrence n8 step", "f16", 8, 4, 24, true },
  { "recurrence n32 slice", "f16", 32, 4, 12, true },
  { "recurrence n64 slice", "f16", 64, 4, 12, true },
}

-- What a variant's A mode (VARIANTS' seventh field) turns on.
local function mode_of(split)
  local tiles = split ~= nil and split:find("^tiles") ~= nil
  return { split = split ~= nil, ahead = split == "ahead", loads = split == "loads", arith = split == "arith",
           halves = split == "halves" and 2 or 1, tiles = tiles, offset = split == "tiles offset" }
end

local groups = script:read("--groups", 2000, options.positive)
if groups % 2 ~= 0 then script:usage_error("--groups must be even (the loop takes two groups a turn)") end
local only = script:read("--only", nil, options.list)
local chosen = {}
for _, v in ipairs(VARIANTS) do
  local wanted = not only
  for _, name in ipairs(only or {}) do wanted = wanted or name == v[1] end
  if wanted then chosen[#chosen + 1] = v end
end
if #chosen == 0 then script:usage_error("--only names no variant") end
local work = {}
for _, v in ipairs(chosen) do
  work[#work + 1] = ("%s: m64n%dk%d %s, %d warpgroup%s, %d a group%s%s, %d groups"):format(v[1], v[3],
    v[2] == "f16" and 16 or 8, v[2], v[4], v[4] > 1 and "s" or "", v[5], v[6] and ", adds" or "",
    v[7] and (", A: " .. v[7]) or "", groups)
end
local status = script:plan(work)

-- The kernel of one variant: the instruction's text with its n/2 accumulator
-- registers written out.
local function source(kind, n, wgs, per_group, adds, mode)
  local regs = n // 2
  local list, operands = {}, {}
  for i = 0, regs - 1 do
    list[#list + 1] = "%" .. i
    operands[#operands + 1] = ('"+f"(d[%d])'):format(i)
  end
  local shape = kind == "f16" and ("m64n%dk16.f32.f16.f16"):format(n) or ("m64n%dk8.f32.tf32.tf32"):format(n)
  local tail = kind == "f16" and "p, 1, 1, 0" or "p, 1, 1"
  local mma = ([[
static __device__ __forceinline__ void mma(float (&d)[%d], const unsigned (&a)[4], unsigned long long desc, int scale)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %%%d, 0;\n"
                 "wgmma.mma_async.sync.aligned.%s {%s}, {%%%d, %%%d, %%%d, %%%d}, %%%d, %s;\n}\n"
                 : %s
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale));
}
]]):format(regs, regs + 5, shape, table.concat(list, ", "), regs, regs + 1, regs + 2, regs + 3, regs + 4, tail,
    table.concat(operands, ", "))
  -- B: n rows of 64 bytes (f16, 64-byte swizzle) or 128 (tf32, 128-byte),
  -- addressed by the kernel's descriptors.
  local row_bytes, descriptor = kind == "f16" and 64 or 128, kind == "f16" and "spk_tma16_desc" or "spk_tma_desc"
  local flag = function(on) return on and 1 or 0 end
  return ([[
#include "gemm_3xtf32_tma.cuh"
#define REGS %d
#define THREADS %d
#define PER_GROUP %d
#define ADDS %d
#define B_BYTES %d
#define SPLIT %d
#define AHEAD %d
#define LOADS %d
#define ARITH %d
#define HALVES %d
#define TILES %d
#define OFFSET %d
%s
static __device__ __forceinline__ void pin(float (&d)[REGS])
{
#pragma unroll
    for (int i = 0; i < REGS; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
spk_wgmma_rate(float *cycles, int groups, float *sink)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) unsigned char smem[];
    for (int i = threadIdx.x; i < (SPLIT ? 2 * HALVES * B_BYTES + 4 * 16384 + TILES * 65536 : B_BYTES) / 4;
         i += THREADS)
        reinterpret_cast<unsigned *>(smem)[i] = 0x3c003c00u;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    const unsigned base = (unsigned)__cvta_generic_to_shared(smem);
    const unsigned long long desc = %s(base);
    unsigned a[4];
#pragma unroll
    for (int i = 0; i < 4; i++)
        a[i] = 0x3c003c00u ^ (threadIdx.x & 7u);
    float d[REGS], acc[REGS], acc2[HALVES > 1 ? REGS : 1];
#pragma unroll
    for (int i = 0; i < REGS; i++)
        d[i] = acc[i] = acc2[HALVES > 1 ? i : 0] = 0.0f;
    __syncthreads();
    const int wg = threadIdx.x / 128, w = (threadIdx.x / 32) & 3, lane = threadIdx.x & 31;
    const float a_scale = sink[1] + 1.0f; // 1, unknown to the compiler
    unsigned hi[2][4], lo[2][4], next_hi[2][4], next_lo[2][4];
    // group g's A from tile g %% 4, loaded and split into FP16 parts
    auto load_split = [&](int g, unsigned (&h)[2][4], unsigned (&l)[2][4]) {
        const unsigned char *tile = smem + 2 * HALVES * B_BYTES + (g & 3) * 16384;
#pragma unroll
        for (int q = 0; q < 2; q++)
#pragma unroll
            for (int r = 0; r < 4; r++) {
                // the kernel's place of the pair (spk_tma16_a_offset's row and column)
                const unsigned row = SPK_TMA_WG_ROWS * wg + spk_tma16_a_row(w, lane, r);
                const unsigned col = 16u * q + spk_tma16_a_col(lane, r, 0);
                float2 x;
                if (ARITH)
                    x = make_float2(__int_as_float(0x3e000000 + (g << 4) + row), __int_as_float(0x3e000000 + col));
                else
                    x = *reinterpret_cast<const float2 *>(tile + spk_tma_swizzled(row, col));
                if (LOADS) {
                    h[q][r] = __float_as_uint(x.x);
                    l[q][r] = __float_as_uint(x.y);
                } else
                    spk_tma16_split(__fmul_rn(x.x, a_scale), __fmul_rn(x.y, a_scale), h[q][r], l[q][r]);
            }
    };
    // a tile's end: this warpgroup's C into its half of C's buffer, as the
    // kernel's epilogue does before its bulk store
    auto epilogue = [&]() {
        const unsigned half_c = base + 2 * HALVES * B_BYTES + 4 * 16384 + wg * 32768;
        asm volatile("bar.sync %%0, 128;" ::"r"(1 + wg) : "memory");
#pragma unroll
        for (int i = 0; i < REGS; i += 2) {
            const unsigned dst = half_c + spk_tma_c_offset(spk_tma_acc_row(w, lane, i), spk_tma_acc_col(lane, i));
            asm volatile("st.shared.v2.f32 [%%0], {%%1, %%2};" ::"r"(dst), "f"(a_scale * acc[i]), "f"(a_scale * acc[i + 1])
                         : "memory");
            acc[i] = acc[i + 1] = 0.0f;
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("bar.sync %%0, 128;" ::"r"(1 + wg) : "memory");
    };
    // one group on the parts h, l; ahead, the next group's parts into nh, nl
    // while its wgmmas run (the two sets alternate, so no wgmma's input is
    // written under it)
    auto group = [&](int g, unsigned (&h)[2][4], unsigned (&l)[2][4], unsigned (&nh)[2][4], unsigned (&nl)[2][4]) {
        if (SPLIT && !AHEAD)
            load_split(g, h, l);
#pragma unroll
        for (int half = 0; half < HALVES; half++) {
            const unsigned long long desc_half = desc + half * (B_BYTES >> 4) * 2;
            pin(d);
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
            if (SPLIT) {
                const unsigned long long desc_lo = desc_half + (B_BYTES >> 4);
#pragma unroll
                for (int q = 0; q < 2; q++)
                    mma(d, l[q], desc_half + 2 * q, q > 0);
#pragma unroll
                for (int q = 0; q < 2; q++)
                    mma(d, h[q], desc_lo + 2 * q, 1);
#pragma unroll
                for (int q = 0; q < 2; q++)
                    mma(d, h[q], desc_half + 2 * q, 1);
            } else
#pragma unroll
            for (int p = 0; p < PER_GROUP; p++)
                mma(d, a, desc + 2 * (p %% 2), !ADDS || p > 0);
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            if (AHEAD && half == HALVES - 1)
                load_split(g + 1, nh, nl);
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
            pin(d);
            if (ADDS) {
#pragma unroll
                for (int i = 0; i < REGS; i++)
                    if (half == 0)
                        acc[i] += d[i];
                    else
                        acc2[HALVES > 1 ? i : 0] += d[i];
            }
            if (TILES && (g & 7) == 7)
                epilogue();
        }
    };
    if (AHEAD)
        load_split(0, hi, lo);
    if (OFFSET && wg == 1)
        for (int g = 0; g < 4; g += 2) {
            group(g, hi, lo, next_hi, next_lo);
            group(g + 1, next_hi, next_lo, hi, lo);
        }
    const unsigned long long t0 = clock64();
    for (int g = 0; g < groups; g += 2) {
        group(g, hi, lo, next_hi, next_lo);
        group(g + 1, next_hi, next_lo, hi, lo);
    }
    const unsigned long long t1 = clock64();
    if (threadIdx.x %% 128 == 0)
        cycles[blockIdx.x * (THREADS / 128) + threadIdx.x / 128] = (float)(t1 - t0);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < REGS; i++)
        s += acc[i] + d[i] + acc2[HALVES > 1 ? i : 0];
    if (s == 1.2345f)
        sink[0] = s;
#else
    asm volatile("trap;");
#endif
}
]]):format(regs, 128 * wgs, per_group, flag(adds), n * row_bytes, flag(mode.split), flag(mode.ahead),
    flag(mode.loads), flag(mode.arith), mode.halves, flag(mode.tiles), flag(mode.offset), mma, descriptor)
end

local sms = spk.cuda.device().sms
for _, line in ipairs(require("spk.provenance").lines()) do print(line) end
print(("%-32s %-22s %4s %5s %5s %12s %10s %8s"):format("variant", "instruction", "wgs", "group", "adds",
  "cycles/group", "cyc/wgmma", "tensor %"))
local sink = spk.cuda.zeros({ 2 })
for i, v in ipairs(chosen) do
  status:step(work[i])
  local _, kind, n, wgs, per_group, adds, split = table.unpack(v)
  local mode = mode_of(split)
  local kernel = spk.cuda.compile { arch = "sm_90a", source = source(kind, n, wgs, per_group, adds, mode),
                                    options = { "-I" .. spk.cuda.kernel_dir() } }
    :kernel("spk_wgmma_rate")
  local cycles = spk.cuda.zeros({ sms * wgs }) -- a warpgroup's cycles
  -- one block an SM: more shared memory than half an SM's
  local launch = { grid = sms, block = 128 * wgs, smem = (mode.tiles and 200 or 120) * 1024,
                   args = { cycles, spk.i32(groups), sink } }
  kernel:launch(launch) -- warm-up
  kernel:launch(launch)
  spk.cuda.synchronize()
  local host = cycles:cpu()
  local counts = {}
  for w = 1, sms * wgs do counts[#counts + 1] = host:get(w) end
  table.sort(counts)
  local median = counts[(#counts + 1) // 2]
  local per_group_cycles = median / groups
  local wgmmas = per_group * mode.halves -- a warpgroup's in a group
  local per_wgmma = per_group_cycles / (wgmmas * wgs)
  local k = kind == "f16" and 16 or 8
  local rate = kind == "f16" and 2048 or 1024
  local ideal = 64 * n * k / rate
  status:print(("%-32s %-22s %4d %5d %5s %12.1f %10.1f %8.1f"):format(v[1], ("m64n%dk%d %s"):format(n, k, kind), wgs,
    wgmmas, adds and "yes" or "no", per_group_cycles, per_wgmma, 100 * ideal / per_wgmma))
end
status:finish()
print(("wgmma_rate: %d variants"):format(#chosen))
