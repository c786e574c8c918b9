/* Placeholder until the tensor bindings land. */
#include "lua/bind.h"

void spk_open_tensor(lua_State *L, int module)
{
    (void)L;
    (void)module;
}
