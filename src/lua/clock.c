/* spk.clock_ms(): milliseconds on the monotonic clock, for wall-clock timing of
 * host work (the CPU backend in spk bench); GPU work is timed with CUDA events
 * (spk.bench). Only differences between two readings mean anything. */
#include <time.h>

#include "lua/areas.h"

static int module_clock_ms(lua_State *L)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6);
    return 1;
}

void spk_open_clock(lua_State *L, int module)
{
    static const spk_lua_checked_reg functions[] = {
        {"clock_ms", module_clock_ms,
         "spk.clock_ms() -> milliseconds\n"
         "The monotonic clock, for wall-clock timing of host work; only differences mean anything\n"
         "(GPU work is timed with CUDA events: spk.bench).",
         ""},
        {NULL, NULL, NULL, NULL},
    };
    lua_pushvalue(L, module);
    spk_lua_setfuncs_checked(L, functions, NULL);
    lua_pop(L, 1);
}
