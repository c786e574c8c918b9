/* The doc registry's C side (see lua/bind.h): two tables in the Lua registry,
 * created on first use, and core.doc_registry() that hands them to
 * lua/spk/doc.lua. Keys are the documented values themselves, so help(f)
 * finds f's text whatever name f is reached by. */
#include <string.h>

#include "lua/bind.h"

#define DOC_VALUES_KEY "spk.doc.values"
#define DOC_TYPES_KEY "spk.doc.types"

/* registry[key], made empty where missing; returns whether it existed. Raw
 * access, as every binding reads tables (lua/bind.h). */
static int raw_subtable(lua_State *L, const char *key)
{
    if (spk_lua_rawfield(L, LUA_REGISTRYINDEX, key) == LUA_TTABLE)
        return 1;
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, key);
    return 0;
}

static void push_values(lua_State *L)
{
    if (raw_subtable(L, DOC_VALUES_KEY))
        return;
    /* Weak keys: a plan's per-instance closures leave with the plan. */
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
}

void spk_lua_setdoc(lua_State *L, int idx, const char *doc)
{
    idx = lua_absindex(L, idx);
    push_values(L);
    lua_pushvalue(L, idx);
    lua_pushstring(L, doc);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

static int is_metamethod(const char *name)
{
    return name[0] == '_' && name[1] == '_';
}

void spk_lua_setfuncs(lua_State *L, const spk_lua_reg *l, int nup)
{
    luaL_checkstack(L, nup + 2, "too many upvalues");
    for (; l->name != NULL; l++) {
        if ((l->doc == NULL || l->doc[0] == '\0') && !is_metamethod(l->name))
            luaL_error(L, "spk: binding '%s' has no documentation (give it a doc beside its registration)",
                       l->name);
        for (int i = 0; i < nup; i++)
            lua_pushvalue(L, -nup);
        lua_pushcclosure(L, l->func, nup);
        if (l->doc != NULL && l->doc[0] != '\0')
            spk_lua_setdoc(L, -1, l->doc);
        lua_setfield(L, -(nup + 2), l->name);
    }
    lua_pop(L, nup);
}

void spk_lua_settype(lua_State *L, const char *type_name, int methods_idx, const char *doc)
{
    methods_idx = lua_absindex(L, methods_idx);
    raw_subtable(L, DOC_TYPES_KEY);
    lua_createtable(L, 0, 2);
    lua_pushvalue(L, methods_idx);
    lua_setfield(L, -2, "methods");
    lua_pushstring(L, doc);
    lua_setfield(L, -2, "doc");
    lua_setfield(L, -2, type_name);
    lua_pop(L, 1);
}

void spk_lua_push_doc_registry(lua_State *L)
{
    push_values(L);
    raw_subtable(L, DOC_TYPES_KEY);
}

static int l_doc_registry(lua_State *L)
{
    spk_lua_noextra(L, 0);
    spk_lua_push_doc_registry(L);
    return 2;
}

void spk_open_doc(lua_State *L, int module)
{
    static const spk_lua_reg functions[] = {
        {"doc_registry", l_doc_registry,
         "spk.core.doc_registry() -> values, types\n"
         "The doc registry behind help(): values maps each documented function or table to its text (weak\n"
         "keys); types maps a userdata type's metatable name to {methods =, doc =}. lua/spk/doc.lua reads\n"
         "and extends them."},
        {NULL, NULL, NULL},
    };
    lua_pushvalue(L, module);
    spk_lua_setfuncs(L, functions, 0);
    lua_pop(L, 1);
}
