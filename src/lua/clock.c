/* spk.clock_ms(): milliseconds on the monotonic clock, for wall-clock timing of
 * host work (the CPU backend in spk bench); GPU work is timed with CUDA events
 * (spk.bench). Only differences between two readings mean anything. */
#include <time.h>

#include "lua/bind.h"

static int module_clock_ms(lua_State *L)
{
    spk_lua_noextra(L, 0);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6);
    return 1;
}

void spk_open_clock(lua_State *L, int module)
{
    lua_pushcfunction(L, module_clock_ms);
    lua_setfield(L, module, "clock_ms");
}
