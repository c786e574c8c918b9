/* Placeholder until the cuda bindings land. */
#include "lua/bind.h"

void spk_open_cuda(lua_State *L, int module)
{
    (void)L;
    (void)module;
}
