/* The tensor area's binding files (tensor.c, random.c, files.c, compare.c):
 * spk_open_tensor opens the others. Lua sees 1-based dims and indices; C
 * sees 0-based. Their argument readers (dtypes, shapes, options) are
 * lua/bind.h's. */
#ifndef SPK_LUA_TENSOR_AREA_H
#define SPK_LUA_TENSOR_AREA_H

#include "lua/bind.h"

void spk_open_random(lua_State *L, int module);
void spk_open_files(lua_State *L, int module);
void spk_open_compare(lua_State *L, int module);

#endif
