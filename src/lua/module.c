/* The C module: `spk.core` holds every binding; `require "spk"` loads
 * lua/spk/init.lua, which builds the friendly API on top of it. The same
 * entry points serve build/spk.so (loaded by lua5.4 and busted) and the spk
 * program (which preloads them). */
#include <limits.h>
#include <stdio.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>

#include "core/error.h"
#include "core/paths.h"
#include "lua/areas.h"
#include "lua/cuda_area.h"

int luaopen_spk_core(lua_State *L);
int luaopen_spk(lua_State *L);

/* spk.find_dir(kind) -> the folder of spk's files of that kind ("lua",
 * "kernels", "experiments", "tools"; the rule is in src/core/paths.h), or nil
 * and a message naming where it looked. spk.find_dir() -> {kind = folder or
 * false} for every kind. */
static int l_find_dir(lua_State *L)
{
    char dir[PATH_MAX];
    if (lua_isnoneornil(L, 1)) {
        lua_newtable(L);
        for (int i = 0; spk_dir_kind(i); i++) {
            if (spk_find_dir(spk_dir_kind(i), dir, sizeof dir) == 0)
                lua_pushstring(L, dir);
            else
                lua_pushboolean(L, 0);
            lua_setfield(L, -2, spk_dir_kind(i));
        }
        spk_clear_error();
        return 1;
    }
    const char *kind = luaL_checkstring(L, 1);
    if (spk_find_dir(kind, dir, sizeof dir) != 0) {
        if (!spk_dir_env(kind))
            return luaL_argerror(L, 1, spk_last_error());
        luaL_pushfail(L);
        lua_pushstring(L, spk_last_error());
        return 2;
    }
    lua_pushstring(L, dir);
    return 1;
}

/* spk.clock_ms(): milliseconds on the monotonic clock, for wall-clock timing
 * of host work (the CPU backend in spk bench); GPU work is timed with CUDA
 * events (spk.bench). Only differences between two readings mean anything. */
static int l_clock_ms(lua_State *L)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6);
    return 1;
}

static const spk_lua_checked_reg spk_functions[] = {
    {"find_dir", l_find_dir,
     "spk.find_dir([kind]) -> folder | nil, message\n"
     "Where spk's lua, kernels, experiments or tools files are ($SPK_*_DIR, the install prefix, the\n"
     "source tree); no kind: a table of every kind.",
     "kind"},
    {"clock_ms", l_clock_ms,
     "spk.clock_ms() -> milliseconds\n"
     "The monotonic clock, for wall-clock timing of host work; only differences mean anything\n"
     "(GPU work is timed with CUDA events: spk.bench).",
     ""},
    {NULL, NULL, NULL, NULL},
};

/* core.doc_registry(): the doc registry (lua/bind.h keeps it) for
 * lua/spk/doc.lua, which reads and extends it. */
static int l_doc_registry(lua_State *L)
{
    spk_lua_push_doc_registry(L);
    return 2;
}

static const spk_lua_checked_reg core_functions[] = {
    {"doc_registry", l_doc_registry,
     "spk.core.doc_registry() -> values, types\n"
     "The doc registry behind help(): values maps each documented function or table to its text (weak\n"
     "keys); types maps a userdata type's metatable name to {methods =, doc =}. lua/spk/doc.lua reads\n"
     "and extends them.",
     ""},
    {NULL, NULL, NULL, NULL},
};

int luaopen_spk_core(lua_State *L)
{
    lua_newtable(L);
    int module = lua_gettop(L);
    spk_open_tensor(L, module);
    spk_open_cuda(L, module);
    spk_lua_rawfield(L, module, "cuda");
    spk_open_cuda_kernels(L, lua_gettop(L));
    lua_pop(L, 1);
    spk_open_launch_limits(L, module);
    spk_open_blas(L, module);
    spk_open_lstm(L, module);
    spk_open_plan(L, module);
    spk_open_cudnn(L, module);
    spk_lua_register(L, module, spk_functions, NULL);
    spk_lua_register(L, module, core_functions, "spk.core");
    spk_open_timeline(L, module);
    spk_open_system(L, module);
    char dir[PATH_MAX];
    if (spk_find_dir("lua", dir, sizeof dir) == 0) {
        lua_pushstring(L, dir);
        lua_setfield(L, module, "lua_dir");
    }
    spk_clear_error();
    return 1;
}

int luaopen_spk(lua_State *L)
{
    char dir[PATH_MAX];
    if (spk_find_dir("lua", dir, sizeof dir) != 0)
        return luaL_error(L, "cannot load spk: %s", spk_last_error());

    /* package.loaded["spk.core"] = the C table, so init.lua can require it. */
    spk_lua_rawfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE); /* made by luaL_openlibs */
    spk_lua_rawfield(L, -1, "spk.core");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        luaopen_spk_core(L);
        lua_pushvalue(L, -1);
        lua_setfield(L, -3, "spk.core");
    }
    lua_pop(L, 2);

    /* Put lua/ first on package.path so spk.* Lua modules are found. */
    spk_lua_rawglobal(L, "package");
    spk_lua_rawfield(L, -1, "path");
    const char *old = lua_tostring(L, -1);
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, old ? old : "");
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);

    char init[PATH_MAX + 16];
    snprintf(init, sizeof init, "%s/spk/init.lua", dir);
    if (luaL_loadfile(L, init) != LUA_OK)
        return lua_error(L);
    lua_pushstring(L, "spk");
    lua_pushstring(L, init);
    lua_call(L, 2, 1);
    return 1;
}
