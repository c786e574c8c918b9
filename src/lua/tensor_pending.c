/* Until the core's safetensors and comparison code lands, the file and
 * comparison bindings register nothing. */
#include "lua/tensor_area.h"

void spk_open_files(lua_State *L, int module)
{
    (void)L;
    (void)module;
}

void spk_open_compare(lua_State *L, int module)
{
    (void)L;
    (void)module;
}
