/* The status codes the built-in recurrence kernels write to the status word
 * (atomicCAS from 0) when they give up, one list that the kernels and their
 * host (src/lstm/family.c: the messages the plan reports after "lstm stack: ")
 * both include, so a code and its meaning cannot drift apart. Each entry is
 * X(NAME, code, "message"); a kernel of one's own declares its own codes
 * (docs/kernels.md). (Plain C and C++: an enum only.) */
#ifndef SPK_STATUS_CUH
#define SPK_STATUS_CUH

#define SPK_KERNEL_STATUSES(X)                                                                                         \
    X(STATUS_TIMEOUT, 1, "a recurrence block waited longer than the timeout for a step flag (a block of its tile was " \
                         "not running); the output is not valid")                                                      \
    X(STATUS_BAD_GEOMETRY, 2, "the recurrence kernel refused its launch geometry (grid, block size, tile rows or "     \
                              "shared memory); the output is not valid")                                               \
    X(STATUS_NEEDS_SM90, 3, "the cluster kernel was built for an architecture below sm_90 and did not run")           \
    X(STATUS_EXCHANGE_TIMEOUT, 4, "the cluster kernel's mbarrier exchange timed out (a wait of over a second); the "   \
                                  "output is not valid")

#define SPK_STATUS_ENTRY(name, code, message) name = code,
enum spk_kernel_status { SPK_KERNEL_STATUSES(SPK_STATUS_ENTRY) };
#undef SPK_STATUS_ENTRY

#endif
