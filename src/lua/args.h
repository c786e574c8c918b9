/* Argument lists of the Lua bindings: every registered function refuses
 * arguments past the ones it takes, naming the first extra one, and type
 * errors name spk's objects ("tensor", "generator") instead of "userdata".
 *
 * A binding lists its functions as spk_lua_checked_reg entries: a
 * spk_lua_reg's name, function and doc (bind.h), and the parameters as the
 * message shows them: {"sum", tensor_sum, "t:sum(...) ...", "dim, keepdim"}.
 * Registered with
 * spk_lua_setfuncs_checked, each C function runs behind a check that counts its
 * arguments (trailing nils do not count: nil is "absent" in Lua) before the
 * function itself sees them:
 *
 *     x:add(b, 2)   ->  bad argument #2 to 'add' (unexpected argument (number 2):
 *                       tensor:add takes (other))
 *
 * A parameter list with "..." ("shape..., dtype") takes any number; such a function reads
 * what it takes and then calls spk_lua_check_end with the first argument it
 * did not read. The check runs as the registered function itself (no extra
 * call level), so luaL_argerror's names and method numbering are unchanged;
 * the C function must not use upvalues of its own. */
#ifndef SPK_LUA_ARGS_H
#define SPK_LUA_ARGS_H

#include <stdbool.h>

#include "lua/bind.h"

/* The object methods are called on: its name in messages and, for objects
 * that can be closed, whether the one at idx is (a closed self is reported
 * before extra arguments, since it is what is wrong). */
typedef struct spk_lua_checked_reg {
    const char *name;
    lua_CFunction func;
    const char *doc;
    const char *params; /* "" for none; with "..." for a list the function checks */
} spk_lua_checked_reg;

typedef struct spk_lua_self {
    const char *name;
    bool (*is_closed)(lua_State *L, int idx); /* may be NULL */
} spk_lua_self;

/* Registers `fns` (ending with a NULL name) into the table at the top of the
 * stack, each behind the argument check and with its doc recorded as
 * spk_lua_setfuncs does. `params`: "" for none, with "..." for a list the
 * function checks. `self` (static storage) describes the object for methods
 * (argument 1 is self and is not among `params`), or is NULL for module
 * functions, whose messages read "spk.<name> takes (...)". */
void spk_lua_setfuncs_checked(lua_State *L, const spk_lua_checked_reg *fns, const spk_lua_self *self);

/* Raises the extra-argument error if any argument from `first` on is not nil.
 * For functions whose parameter list ends in "...". */
void spk_lua_check_end(lua_State *L, int first);

/* What the value at idx is, as messages say it: "tensor", "closed tensor",
 * "generator" (spk objects by kind), "number", "string", "table", ..., the
 * __name of another library's object. */
const char *spk_lua_typename(lua_State *L, int idx);

/* luaL_typeerror with spk_lua_typename: "<expected> expected, got <type>". */
int spk_lua_typeerror(lua_State *L, int arg, const char *expected);


#endif
