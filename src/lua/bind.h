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
    /* The parameters for the argument check of spk_lua_setfuncs_checked
     * (lua/args.h), as its messages show them; NULL where it is not used. */
    const char *params;
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
void spk_open_lstm(lua_State *L, int module);
void spk_open_stack(lua_State *L, int module);
void spk_open_cluster(lua_State *L, int module);
void spk_open_cudnn(lua_State *L, int module);
void spk_open_clock(lua_State *L, int module);
void spk_open_doc(lua_State *L, int module);
void spk_open_onnx(lua_State *L, int module);

#endif
