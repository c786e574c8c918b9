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

/* ---- arguments ----
 * A binding that has taken a pointer out of a Lua object (a tensor, a plan, a
 * kernel, a stream) must not let Lua code run before its last use of it:
 * __index, __len, __tostring, __eq ... of an argument could close or drop the
 * object. So argument tables are read raw, with the helpers below (never
 * lua_getfield, lua_geti, luaL_len, luaL_tolstring: tests/spec/rawargs_spec.lua
 * refuses them in src/lua and src/cli). A collection step can also run Lua
 * code (the __gc of any object), and any allocation may take one: pointers are
 * taken after the allocations that precede their use (these readers make
 * none), or the tensor is held (spk_lua_holdtensor). */

/* Pushes t[key] of the table at idx, read raw by walking its keys (no string
 * is made, so no collection step runs); returns the value's type. */
int spk_lua_rawfield(lua_State *L, int idx, const char *key);
/* Pushes the global `name`, read raw. */
int spk_lua_rawglobal(lua_State *L, const char *name);
/* The raw length of the table at idx, clamped to INT_MAX. */
int spk_lua_rawcount(lua_State *L, int idx);
/* Raises "bad argument #n to 'f' (unexpected argument (a T); it takes at most
 * k)" for the first argument after the first `max` that is not nil (a nil is
 * no argument, as for every optional one). Methods count self, as Lua does. */
void spk_lua_noextra(lua_State *L, int max);
/* Pushes a method `close` calling the release function `release` (also the
 * type's __gc and __close, which Lua calls with more arguments) after
 * spk_lua_noextra(L, 1). */
void spk_lua_push_close_method(lua_State *L, lua_CFunction release);
/* Raises "<where>: unknown option '<key>' (known: a, b, c)" for the first key
 * of the table at idx that is not in the NULL-terminated `known` list (a key
 * that is no string is named by its type). Nothing for nil or a non-table. */
void spk_lua_checkkeys(lua_State *L, int idx, const char *const *known, const char *where);
/* NULL when the key at idx is one of `known` (NULL-terminated), else pushes
 * and returns the message every option check gives: "unknown option 'x'
 * (known: a, b)". */
const char *spk_lua_unknown_key(lua_State *L, int idx, const char *const *known);
/* Pushes a short description of the value at idx for messages, made
 * without running Lua code: number 2, string "hello", table, tensor. */
const char *spk_lua_describe(lua_State *L, int idx);
/* The tensor at idx (as spk_lua_checktensor), held for the rest of the
 * running C function: the pointer returned is a private view of it, pushed
 * as a to-be-closed value (one slot), whose storage stays alive if the
 * tensor is closed meanwhile, and which goes when the function returns or
 * raises. Push it after any stack shuffling (lua_remove, lua_insert). */
spk_tensor *spk_lua_holdtensor(lua_State *L, int idx);

/* The open spk.cuda module at idx (spk.cuda.compile's); a Lua error naming
 * the argument otherwise. */
struct spk_module;
struct spk_module *spk_lua_checkmodule(lua_State *L, int idx);

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

/* ---- documentation --------------------------------------------------------
 * Every binding carries its documentation beside its registration: the doc
 * registry (one per Lua state, read by help() through lua/spk/doc.lua, which
 * Lua modules feed too) maps each function to its text. A doc's first line is
 * the call as a script writes it ("spk.zeros(shape[, dtype]) -> tensor"), the
 * lines after it say what it does. */

/* A luaL_Reg with the binding's documentation. */
typedef struct spk_lua_reg {
    const char *name;
    lua_CFunction func;
    const char *doc;
} spk_lua_reg;

/* luaL_setfuncs for spk_lua_reg: sets each function (closed over the nup
 * values on top of the stack, which are popped) into the table below them and
 * records its doc. An entry without a doc is an error when the module loads
 * (metamethods, "__" names, excepted), so no binding ships undocumented. */
void spk_lua_setfuncs(lua_State *L, const spk_lua_reg *l, int nup);

/* Records `doc` for the value at idx (a function or a table). */
void spk_lua_setdoc(lua_State *L, int idx, const char *doc);

/* Records a userdata type: the methods table at idx serves values whose
 * metatable is named type_name (their __index may be a function, which help
 * and completion never call), with the type's doc. */
void spk_lua_settype(lua_State *L, const char *type_name, int methods_idx, const char *doc);

/* Pushes the registry's two tables: values -> doc (weak keys), and
 * type name -> {methods =, doc =}. */
void spk_lua_push_doc_registry(lua_State *L);

/* Each area registers its functions into the module table at `module`
 * (an absolute stack index). */
void spk_open_tensor(lua_State *L, int module);
void spk_open_cuda(lua_State *L, int module);
void spk_open_launch_limits(lua_State *L, int module); /* spk.cuda's launch limits (launch_limits.c) */
void spk_open_lstm(lua_State *L, int module);
void spk_open_persistent(lua_State *L, int module);
void spk_open_cluster(lua_State *L, int module);
void spk_open_cudnn(lua_State *L, int module);
void spk_open_clock(lua_State *L, int module);
void spk_open_doc(lua_State *L, int module);
void spk_open_onnx(lua_State *L, int module);
void spk_open_timeline(lua_State *L, int module);
void spk_open_kernel_stack(lua_State *L, int module);
void spk_open_system(lua_State *L, int module);

#endif
