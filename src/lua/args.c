/* Argument-list checks shared by the bindings (args.h). */
#include "lua/args.h"

#include <string.h>

/* Upvalues of a checked function: the entry, the self kind (or nil) and the
 * most arguments it takes (-1: any, the function checks with check_end). */
#define UP_FN 1
#define UP_SELF 2
#define UP_MAX 3

static int count_params(const char *params, bool *varargs)
{
    *varargs = false;
    if (!params || !*params)
        return 0;
    int n = 1;
    for (const char *p = params; *p; p++)
        n += *p == ',';
    *varargs = strstr(params, "...") != NULL;
    return n;
}

const char *spk_lua_typename(lua_State *L, int idx)
{
    if (lua_type(L, idx) != LUA_TUSERDATA)
        return luaL_typename(L, idx);
    spk_lua_tensor *t = luaL_testudata(L, idx, SPK_TENSOR_MT);
    if (t)
        return t->t ? "tensor" : "closed tensor";
    const char *name = NULL;
    if (lua_getmetatable(L, idx)) {
        if (spk_lua_rawfield(L, -1, "__name") == LUA_TSTRING)
            name = lua_tostring(L, -1); /* kept alive by the metatable */
        lua_pop(L, 2);
    }
    if (!name)
        return "userdata of another library";
    /* spk's own objects without the prefix: "generator", "cuda.module" */
    if (strncmp(name, "spk.", 4) == 0)
        return name + 4;
    return name;
}

int spk_lua_typeerror(lua_State *L, int arg, const char *expected)
{
    const char *got = spk_lua_typename(L, arg);
    return luaL_argerror(L, arg, lua_pushfstring(L, "%s expected, got %s", expected, got));
}

const char *spk_lua_describe(lua_State *L, int idx)
{
    switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx))
            return lua_pushfstring(L, "number %I", (LUAI_UACINT)lua_tointeger(L, idx));
        if (lua_tonumber(L, idx) != lua_tonumber(L, idx))
            return lua_pushstring(L, "number nan"); /* whatever its sign bit */
        return lua_pushfstring(L, "number %f", (LUAI_UACNUMBER)lua_tonumber(L, idx));
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        if (len > 40)
            return lua_pushfstring(L, "string \"%.37s...\"", s);
        return lua_pushfstring(L, "string \"%s\"", s);
    }
    case LUA_TBOOLEAN: return lua_pushstring(L, lua_toboolean(L, idx) ? "boolean true" : "boolean false");
    default: return lua_pushstring(L, spk_lua_typename(L, idx));
    }
}

/* The extra-argument error for argument `arg` of the running checked function. */
static int extra_argument(lua_State *L, int arg)
{
    const spk_lua_checked_reg *fn = lua_touserdata(L, lua_upvalueindex(UP_FN));
    const spk_lua_self *kind = lua_touserdata(L, lua_upvalueindex(UP_SELF));
    const char *self = kind ? kind->name : NULL;
    if (kind && kind->is_closed && kind->is_closed(L, 1))
        luaL_argerror(L, 1, lua_pushfstring(L, "%s is closed", self));
    const char *what = spk_lua_describe(L, arg);
    const char *name = fn ? fn->name : "?";
    const char *params = fn && fn->params ? fn->params : "";
    const char *sig;
    if (self)
        sig = *params ? lua_pushfstring(L, "%s:%s takes (%s)", self, name, params)
                      : lua_pushfstring(L, "%s:%s takes no arguments", self, name);
    else
        sig = *params ? lua_pushfstring(L, "spk.%s takes (%s)", name, params)
                      : lua_pushfstring(L, "spk.%s takes no arguments", name);
    return luaL_argerror(L, arg, lua_pushfstring(L, "unexpected argument (%s): %s", what, sig));
}

void spk_lua_check_end(lua_State *L, int first)
{
    int top = lua_gettop(L);
    for (int i = first; i <= top; i++)
        if (!lua_isnil(L, i))
            extra_argument(L, i);
}

static int checked_call(lua_State *L)
{
    const spk_lua_checked_reg *fn = lua_touserdata(L, lua_upvalueindex(UP_FN));
    lua_Integer max = lua_tointeger(L, lua_upvalueindex(UP_MAX));
    if (max >= 0 && lua_gettop(L) > max) {
        spk_lua_check_end(L, (int)max + 1);
        lua_settop(L, (int)max); /* only nils were past the end */
    }
    return fn->func(L);
}

void spk_lua_setfuncs_checked(lua_State *L, const spk_lua_checked_reg *fns, const spk_lua_self *self)
{
    for (; fns->name; fns++) {
        bool varargs;
        int n = count_params(fns->params, &varargs);
        lua_pushlightuserdata(L, (void *)fns);
        if (self)
            lua_pushlightuserdata(L, (void *)self);
        else
            lua_pushnil(L);
        lua_pushinteger(L, varargs ? -1 : n + (self ? 1 : 0));
        lua_pushcclosure(L, checked_call, 3);
        if (!fns->doc || !fns->doc[0])
            luaL_error(L, "spk: binding '%s' has no documentation (give it a doc beside its registration)",
                       fns->name);
        spk_lua_setdoc(L, -1, fns->doc);
        lua_setfield(L, -2, fns->name);
    }
}
