/* The argument readers every binding shares (bind.h): raw table reads, the
 * extra-argument and unknown-option checks, and held tensors. */
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "lua/bind.h"

int spk_lua_rawfield(lua_State *L, int idx, const char *key)
{
    idx = lua_absindex(L, idx);
    luaL_checkstack(L, 3, "reading a table");
    size_t n = strlen(key);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -2) == LUA_TSTRING) {
            size_t len;
            const char *k = lua_tolstring(L, -2, &len);
            if (len == n && memcmp(k, key, n) == 0) {
                lua_remove(L, -2);
                return lua_type(L, -1);
            }
        }
        lua_pop(L, 1);
    }
    lua_pushnil(L);
    return LUA_TNIL;
}

int spk_lua_rawglobal(lua_State *L, const char *name)
{
    lua_pushglobaltable(L);
    int type = spk_lua_rawfield(L, -1, name);
    lua_remove(L, -2);
    return type;
}

int spk_lua_rawcount(lua_State *L, int idx)
{
    lua_Unsigned n = lua_rawlen(L, idx);
    return n > INT_MAX ? INT_MAX : (int)n;
}

/* A value's type for messages: a userdata by its metatable's __name. */
static const char *type_name(lua_State *L, int idx)
{
    if (lua_type(L, idx) == LUA_TUSERDATA && luaL_getmetafield(L, idx, "__name") != LUA_TNIL) { /* raw */
        const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        lua_pop(L, 1); /* the name stays alive in the metatable */
        if (name)
            return name;
    }
    return luaL_typename(L, idx);
}

static const char *article(const char *word) { return strchr("aeioAEIO", word[0]) ? "an" : "a"; }

void spk_lua_noextra(lua_State *L, int max)
{
    int top = lua_gettop(L);
    for (int i = max + 1; i <= top; i++) {
        if (lua_isnil(L, i))
            continue;
        lua_Debug ar;
        int shown = max;
        if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.namewhat && strcmp(ar.namewhat, "method") == 0)
            shown--; /* luaL_argerror numbers a method's arguments without self */
        const char *type = type_name(L, i);
        if (shown == 0)
            luaL_argerror(L, i, lua_pushfstring(L, "unexpected argument (%s %s); it takes none", article(type), type));
        luaL_argerror(L, i, lua_pushfstring(L, "unexpected argument (%s %s); it takes at most %d", article(type),
                                            type, shown));
    }
}

static int close_method(lua_State *L)
{
    spk_lua_noextra(L, 1);
    return lua_tocfunction(L, lua_upvalueindex(1))(L);
}

void spk_lua_push_close_method(lua_State *L, lua_CFunction release)
{
    lua_pushcfunction(L, release);
    lua_pushcclosure(L, close_method, 1);
}

const char *spk_lua_unknown_key(lua_State *L, int idx, const char *const *known)
{
    idx = lua_absindex(L, idx);
    for (const char *const *k = known; lua_type(L, idx) == LUA_TSTRING && *k; k++)
        if (strcmp(*k, lua_tostring(L, idx)) == 0)
            return NULL;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (const char *const *k = known; *k; k++) {
        if (k != known)
            luaL_addstring(&b, ", ");
        luaL_addstring(&b, *k);
    }
    luaL_pushresult(&b);
    const char *names = lua_tostring(L, -1);
    if (lua_type(L, idx) == LUA_TSTRING)
        return lua_pushfstring(L, "unknown option '%s' (known: %s)", lua_tostring(L, idx), names);
    const char *type = luaL_typename(L, idx);
    return lua_pushfstring(L, "unknown option %s (%s %s key; known: %s)", spk_lua_describe(L, idx), article(type), type,
                           names);
}

void spk_lua_checkkeys(lua_State *L, int idx, const char *const *known, const char *where)
{
    if (lua_type(L, idx) != LUA_TTABLE)
        return;
    idx = lua_absindex(L, idx);
    luaL_checkstack(L, 4, "reading a table");
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        const char *message = spk_lua_unknown_key(L, -1, known);
        if (message)
            luaL_error(L, "%s: %s", where, message);
    }
}

spk_tensor *spk_lua_holdtensor(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    spk_lua_checktensor(L, idx); /* its errors first */
    /* The slot exists before the tensor is read: making it may collect, and
     * a finalizer may close the tensor (then the check below says so). */
    spk_lua_tensor *u = lua_newuserdatauv(L, sizeof *u, 0);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, SPK_TENSOR_MT);
    lua_toclose(L, -1);
    const spk_tensor *t = spk_lua_checktensor(L, idx);
    spk_tensor *view = malloc(sizeof *view);
    if (!view)
        luaL_error(L, "out of memory");
    *view = *t;
    spk_storage_retain(view->storage);
    u->t = view;
    return view;
}
