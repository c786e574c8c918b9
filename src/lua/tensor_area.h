/* The tensor area's binding files (tensor.c, random.c, files.c, compare.c,
 * tensor_math.c): spk_open_tensor opens the others. Lua sees 1-based dims
 * and indices; C sees 0-based. Their argument readers (dtypes, shapes, options) are
 * lua/bind.h's. */
#ifndef SPK_LUA_TENSOR_AREA_H
#define SPK_LUA_TENSOR_AREA_H

#include "lua/bind.h"

/* tensor_math.c's, for tensor.c: a reduction over the list of dims at `arg`
 * (keepdim at arg + 1) of the tensor at 1; the significant digits tostring(t)
 * prints floats with (spk.print_options; 0: the shortest exact form). */
int spk_lua_reduce_dims(lua_State *L, spk_reduction r, double p, int arg);
int spk_lua_print_digits(lua_State *L);

void spk_open_random(lua_State *L, int module);
void spk_open_files(lua_State *L, int module);
void spk_open_compare(lua_State *L, int module);
void spk_open_tensor_math(lua_State *L, int module);

#endif
