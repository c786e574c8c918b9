// The step timeline of a kernel: %globaltimer and %clock64 stamped at the
// boundaries of a step's stages, for chosen steps and blocks, by one thread a
// block, into a device buffer the host decodes (src/cuda/timeline.h; the
// whole contract, with the decode and the critical path: docs/timeline.md).
//
// A kernel uses four macros:
//   SPK_TIMELINE_PARAMS       right after its last parameter (no comma before
//                             it): the timeline build's seven parameters
//   SPK_TIMELINE_SETUP(stages, direction, block, thread);
//                             once, in the kernel's outermost scope, before the
//                             step loop: `stages` (a constant) is how many stages
//                             a step has; direction, block and thread are this
//                             thread's direction, its block's index within that
//                             direction (linear, the kernel's numbering) and its
//                             index within the threads of that direction
//   SPK_TIMELINE_START(step); where step `step` (0-based, in the order the
//                             direction runs) starts: mark 0, %globaltimer and
//                             %clock64
//   SPK_TIMELINE_STAMP(step, mark);
//                             where its stage `mark` (1-based) ends: %clock64
//                             only (one globaltimer reading a step is what the
//                             alignment needs, and clock64 is the cheap read).
//                             A mark past the stages (255) is dropped, so
//                             STAMP(step, k == first ? DOT + 1 : 255) stamps one
//                             iteration of an unrolled loop without a branch;
//                             a mark stamped twice in a step keeps the later
// and, for a device function of the kernel that stamps too (a stage written as
// a function):
//   SPK_TIMELINE_FN_PARAMS    right after the function's last parameter: the
//                             kernel's recording, handed on
//   SPK_TIMELINE_FN_ARGS(step) right after the last argument of each call of it
//                             (from the kernel, or from a function that has them)
//   SPK_TIMELINE_FN_SETUP(stages); first in its body, `stages` as in SETUP;
//                             then SPK_TIMELINE_STAMP(spk_timeline_step, mark)
//
// SPK_TIMELINE 0 or undefined (every normal build): the macros expand to
// nothing, their arguments are never evaluated and the kernel has no extra
// parameter, so the build is the uninstrumented kernel instruction for
// instruction (tests/c/test_timeline.c compares the PTX).
//
// SPK_TIMELINE 1 (the timeline build): the parameters are
//   unsigned long long *spk_timeline_stamps   the buffer, or NULL: nothing is recorded by this launch
//   int spk_timeline_direction                the direction recorded (0 forward, 1 reverse)
//   int spk_timeline_first_step, spk_timeline_steps    steps first .. first + steps - 1 (0-based)
//   int spk_timeline_first_block, spk_timeline_blocks  blocks first .. first + blocks - 1 (may start
//                                             below 0: a launch that holds only some of them)
//   int spk_timeline_warp                     the warp whose lane 0 stamps
// and the host fills them (spk_timeline_args), so their order lives there and
// here only. A host that names the stages itself (spk.lstm.kernel_stack's
// timeline = {stages = ...}) also defines SPK_TIMELINE_STAGE_COUNT, and SETUP's
// `stages` must equal it: a kernel stamping another number of stages than its
// spec names fails to compile.
//
// Buffer layout (64-bit words; SPK_TIMELINE_HEADER_WORDS of header, written by
// the host, then the records):
//   word 0   SPK_TIMELINE_MAGIC          word 1   marks a record holds (stages + 1)
//   word 2   direction                   word 3   first step      word 4  steps
//   word 5   first block                 word 6   blocks          word 7  warp
//   word 8   layer (the host's)          word 9   marks the kernel stamps: written by every
//                                                 selected block's stamping thread, 0 until one ran
//   words 10 .. 15: zero
//   anchor of block slot b: words HEADER + 2 * b + {0: %globaltimer, 1: %clock64}, at SETUP
//   record (block slot b, step slot k), mark m: words
//     HEADER + 2 * blocks + ((b * steps + k) * marks + m) * 2 + {0: %globaltimer (mark 0;
//     0 at the other marks), 1: %clock64}
// A mark never stamped stays zero. The records are bounded by the selection
// the host sized the buffer with; a mark index past the kernel's stages is
// dropped, so nothing is written outside the buffer.
//
// What a stamp costs and why it cannot change the results. A stamp is one
// inline-PTX block: a predicate, a branch over the timer reads and one
// 16-byte st.global.v2.u64, all inside the asm, so the compiler sees no new
// control flow and no new arithmetic around the kernel's own (floating-point
// contraction and every sum stay as they are); no thread waits for another,
// and nothing the kernel computes is read. Threads that do not stamp take the
// branch: a compare, a set-predicate and a branch a mark. The "memory"
// clobber keeps the compiler from moving the kernel's loads and stores across
// a boundary, so a stage's memory work stays inside its stamps.
//
// One thread a block, lane 0 of a chosen warp: one store per mark and block,
// and a warp's lanes go through a step's stages together (its shuffles keep
// them in step), so one lane sees the warp's boundaries. The warp is chosen
// at run time because in a step without a block barrier (the cluster
// kernel's direct pushes) every warp runs its stages on its own: warp 0 also
// re-arms the mbarrier, and another warp shows the spread. A stamp records
// when the warp issues it: an instruction issued just before (a shared load, a
// shuffle) may still be in flight, so that latency tail lands in the next
// stage; after a wait loop (try_wait, a flag poll) the stamp is exact.
#ifndef SPK_TIMELINE_CUH
#define SPK_TIMELINE_CUH

#define SPK_TIMELINE_MAGIC 0x31454d49544b5053ull /* "SPKTIME1" in little-endian bytes */
#define SPK_TIMELINE_HEADER_WORDS 16
#define SPK_TIMELINE_KERNEL_MARKS_WORD 9
#define SPK_TIMELINE_MAX_MARKS 32

#ifndef SPK_TIMELINE
#define SPK_TIMELINE 0
#endif

#if SPK_TIMELINE

#define SPK_TIMELINE_PARAMS                                                                                            \
    , unsigned long long *spk_timeline_stamps, int spk_timeline_direction, int spk_timeline_first_step,               \
        int spk_timeline_steps, int spk_timeline_first_block, int spk_timeline_blocks, int spk_timeline_warp

// This thread's records (its block's first), or nullptr where it does not stamp.
// The stamping thread also writes its block's anchor (globaltimer, clock64 now,
// before the steps: a second reading however few steps are recorded) and the
// marks it stamps; branch-free outside the asm, as the stamps are.
template <int MARKS>
__device__ __forceinline__ unsigned long long *spk_timeline_setup(unsigned long long *stamps, int selected_direction,
                                                                  int steps, int first_block, int blocks, int warp,
                                                                  int direction, int block, int thread)
{
    static_assert(MARKS >= 2 && MARKS <= SPK_TIMELINE_MAX_MARKS, "a timeline step has 1 to 31 stages");
    const unsigned slot = (unsigned)(block - first_block);
    const unsigned on =
        stamps != nullptr && direction == selected_direction && slot < (unsigned)blocks && thread == 32 * warp;
    const size_t anchor = __cvta_generic_to_global(stamps + SPK_TIMELINE_HEADER_WORDS + 2 * (size_t)slot);
    const size_t marks_word = __cvta_generic_to_global(stamps + SPK_TIMELINE_KERNEL_MARKS_WORD);
    asm volatile("{\n\t"
                 ".reg .pred skip;\n\t"
                 ".reg .u64 now, cycles;\n\t"
                 "setp.eq.u32 skip, %2, 0;\n\t"
                 "@skip bra SPK_TIMELINE_SETUP_DONE;\n\t"
                 "mov.u64 now, %%globaltimer;\n\t"
                 "mov.u64 cycles, %%clock64;\n\t"
                 "st.global.v2.u64 [%0], {now, cycles};\n\t"
                 "st.global.u64 [%1], %3;\n\t"
                 "SPK_TIMELINE_SETUP_DONE:\n\t"
                 "}" ::"l"(anchor),
                 "l"(marks_word), "r"(on), "l"((unsigned long long)MARKS)
                 : "memory");
    return on ? stamps + SPK_TIMELINE_HEADER_WORDS + 2 * (size_t)blocks + (size_t)slot * (size_t)steps * MARKS * 2
              : nullptr;
}

// Mark `mark` of step slot k = step - first_step, if this thread stamps and the step is
// recorded: (globaltimer, clock64) with WITH_GLOBALTIMER, (0, clock64) without.
template <int MARKS, bool WITH_GLOBALTIMER>
__device__ __forceinline__ void spk_timeline_stamp(unsigned long long *records, int k, int steps, int mark)
{
    const unsigned on = records != nullptr && (unsigned)k < (unsigned)steps && (unsigned)mark < (unsigned)MARKS;
    const size_t at = __cvta_generic_to_global(records + ((size_t)(unsigned)k * MARKS + (unsigned)mark) * 2);
    if (WITH_GLOBALTIMER)
        asm volatile("{\n\t"
                     ".reg .pred skip;\n\t"
                     ".reg .u64 now, cycles;\n\t"
                     "setp.eq.u32 skip, %1, 0;\n\t"
                     "@skip bra SPK_TIMELINE_DONE;\n\t"
                     "mov.u64 now, %%globaltimer;\n\t"
                     "mov.u64 cycles, %%clock64;\n\t"
                     "st.global.v2.u64 [%0], {now, cycles};\n\t"
                     "SPK_TIMELINE_DONE:\n\t"
                     "}" ::"l"(at),
                     "r"(on)
                     : "memory");
    else
        asm volatile("{\n\t"
                     ".reg .pred skip;\n\t"
                     ".reg .u64 cycles;\n\t"
                     "setp.eq.u32 skip, %1, 0;\n\t"
                     "@skip bra SPK_TIMELINE_DONE;\n\t"
                     "mov.u64 cycles, %%clock64;\n\t"
                     "st.global.v2.u64 [%0], {0, cycles};\n\t"
                     "SPK_TIMELINE_DONE:\n\t"
                     "}" ::"l"(at),
                     "r"(on)
                     : "memory");
}

#ifdef SPK_TIMELINE_STAGE_COUNT
#define SPK_TIMELINE_CHECK_STAGES(stages)                                                                              \
    static_assert((stages) == SPK_TIMELINE_STAGE_COUNT, "the kernel's SPK_TIMELINE_SETUP stamps another number of "   \
                                                        "stages than its spec's timeline.stages names")
#else
#define SPK_TIMELINE_CHECK_STAGES(stages) static_assert(true, "")
#endif

#define SPK_TIMELINE_SETUP(stages, direction, block, thread)                                                           \
    SPK_TIMELINE_CHECK_STAGES(stages);                                                                                 \
    constexpr int spk_timeline_marks = (stages) + 1;                                                                   \
    unsigned long long *const spk_timeline_records = spk_timeline_setup<spk_timeline_marks>(                           \
        spk_timeline_stamps, spk_timeline_direction, spk_timeline_steps, spk_timeline_first_block,                     \
        spk_timeline_blocks, spk_timeline_warp, (direction), (block), (thread))

#define SPK_TIMELINE_START(step)                                                                                       \
    spk_timeline_stamp<spk_timeline_marks, true>(spk_timeline_records, (step) - spk_timeline_first_step,               \
                                                 spk_timeline_steps, 0)

#define SPK_TIMELINE_STAMP(step, mark)                                                                                 \
    spk_timeline_stamp<spk_timeline_marks, false>(spk_timeline_records, (step) - spk_timeline_first_step,              \
                                                  spk_timeline_steps, (mark))

// A stage function's share of the recording: the records pointer SETUP made, the selected steps and the step.
#define SPK_TIMELINE_FN_PARAMS                                                                                         \
    , unsigned long long *const spk_timeline_records, const int spk_timeline_first_step,                              \
        const int spk_timeline_steps, const int spk_timeline_step
#define SPK_TIMELINE_FN_ARGS(step) , spk_timeline_records, spk_timeline_first_step, spk_timeline_steps, (step)
#define SPK_TIMELINE_FN_SETUP(stages) constexpr int spk_timeline_marks = (stages) + 1

#else

#define SPK_TIMELINE_PARAMS
#define SPK_TIMELINE_SETUP(stages, direction, block, thread) ((void)0)
#define SPK_TIMELINE_START(step) ((void)0)
#define SPK_TIMELINE_STAMP(step, mark) ((void)0)
#define SPK_TIMELINE_FN_PARAMS
#define SPK_TIMELINE_FN_ARGS(step)
#define SPK_TIMELINE_FN_SETUP(stages) ((void)0)

#endif

#endif
