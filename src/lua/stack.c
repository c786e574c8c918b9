/* Placeholder until the stack bindings land. */
#include "lua/bind.h"

void spk_open_stack(lua_State *L, int module)
{
    (void)L;
    (void)module;
}
