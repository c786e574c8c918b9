/* Helpers shared by the tensor area's binding files (tensor.c, random.c,
 * files.c, compare.c, tensor_math.c). Lua sees 1-based dims and indices; C sees 0-based. */
#ifndef SPK_LUA_TENSOR_AREA_H
#define SPK_LUA_TENSOR_AREA_H

#include <stdbool.h>
#include <stdint.h>

#include "lua/bind.h"

/* The dtype named at `arg`, or `fallback` when the argument is absent or nil. */
spk_dtype spk_lua_optdtype(lua_State *L, int arg, spk_dtype fallback);

/* Reads a shape starting at `arg`: either a table {2, 3} or consecutive
 * integer arguments. Stops at the first argument that is not an integer
 * (for varargs) and returns the index of the first argument after the shape.
 * `allow_infer` permits one -1 entry (view/reshape). */
int spk_lua_checkshape(lua_State *L, int arg, int *ndim, int64_t *shape, bool allow_infer);

/* The options table at `arg` (absent or nil is fine); raises an error naming
 * any key not in the NULL-terminated `known` list, so typos do not pass
 * silently. Returns true if a table is present. */
bool spk_lua_checkoptions(lua_State *L, int arg, const char *const *known);
/* Field `key` of the options table at `arg` (absent table: fallback). */
double spk_lua_optfield_number(lua_State *L, int arg, const char *key, double fallback);
spk_dtype spk_lua_optfield_dtype(lua_State *L, int arg, spk_dtype fallback);

/* The argument checks of tensor.c, for the other files: a 1-based dim
 * (negative from the end) as 0-based; a reduction's optional dim
 * (SPK_ALL_DIMS when absent); an optional keepdim boolean; a Lua number as a
 * core scalar (integers exact). */
int spk_lua_checkdim(lua_State *L, int arg, const spk_tensor *t);
int spk_lua_optreducedim(lua_State *L, int arg, const spk_tensor *t);
bool spk_lua_optkeepdim(lua_State *L, int arg);
spk_scalar spk_lua_toscalar(lua_State *L, int idx);
/* self op other (a tensor or a number) for the method at the top of the stack frame. */
int spk_lua_method_binary(lua_State *L, spk_binop op);
/* A reduction over the list of dims at `arg` (keepdim at arg + 1): the
 * tensor (tensor_math.c). */
int spk_lua_reduce_dims(lua_State *L, spk_reduction r, double p, int arg);
/* The significant digits tostring(t) prints floats with (spk.print_options;
 * 0: the shortest exact form). */
int spk_lua_print_digits(lua_State *L);

void spk_open_random(lua_State *L, int module);
void spk_open_files(lua_State *L, int module);
void spk_open_compare(lua_State *L, int module);
void spk_open_tensor_math(lua_State *L, int module);

#endif
