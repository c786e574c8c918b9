/* Shared pieces of the Lua bindings. The bindings are a thin layer over the C
 * library: they check arguments, call one C function, and turn its status into
 * a Lua error carrying spk_last_error(). */
#ifndef SPK_LUA_BIND_H
#define SPK_LUA_BIND_H

#include <lauxlib.h>
#include <lua.h>

#include "core/tensor.h"

#define SPK_TENSOR_MT "spk.tensor"

/* The userdata behind a Lua tensor. `t` is NULL once closed or collected. */
typedef struct spk_lua_tensor {
    spk_tensor *t;
} spk_lua_tensor;

/* Raises a Lua error with spk_last_error(). Never returns. */
int spk_lua_fail(lua_State *L);

/* The tensor at idx; a Lua error naming the argument if it is not one or is closed. */
spk_tensor *spk_lua_checktensor(lua_State *L, int idx);
/* The tensor at idx, or NULL if the value is not an (open) tensor. */
spk_tensor *spk_lua_totensor(lua_State *L, int idx);
/* Pushes a new Lua tensor owning t. If t is NULL, raises spk_last_error(). */
void spk_lua_pushtensor(lua_State *L, spk_tensor *t);
/* Pushes the tensor methods table (the metatable's __index target), so other
 * areas (cuda) can add methods such as :cuda() and :cpu(). */
void spk_lua_push_tensor_methods(lua_State *L);

/* Each area registers its functions into the module table at `module`
 * (an absolute stack index). */
void spk_open_tensor(lua_State *L, int module);
void spk_open_cuda(lua_State *L, int module);
void spk_open_lstm(lua_State *L, int module);
void spk_open_persistent(lua_State *L, int module);
void spk_open_cluster(lua_State *L, int module);
void spk_open_cudnn(lua_State *L, int module);
void spk_open_clock(lua_State *L, int module);

#endif
