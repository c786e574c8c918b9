/* Placeholder until the lstm bindings land. */
#include "lua/bind.h"

void spk_open_lstm(lua_State *L, int module)
{
    (void)L;
    (void)module;
}
