#include "core/cancel.h"

#include <stdatomic.h>

#include "core/error.h"

/* Lock-free, so a signal handler may store to it. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the cancellation flag must be a lock-free atomic");
static atomic_int requested;

void spk_cancel_request(void)
{
    atomic_store_explicit(&requested, 1, memory_order_relaxed);
}

void spk_cancel_reset(void)
{
    atomic_store_explicit(&requested, 0, memory_order_relaxed);
}

bool spk_cancel_requested(void)
{
    return atomic_load_explicit(&requested, memory_order_relaxed) != 0;
}

int spk_cancel_check(void)
{
    return spk_cancel_requested() ? spk_fail("interrupted") : 0;
}
