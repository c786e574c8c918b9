/* The C module: `spk.core` holds every binding; `require "spk"` loads
 * lua/spk/init.lua, which builds the friendly API on top of it. The same
 * entry points serve build/spk.so (loaded by lua5.4 and busted) and the spk
 * program (which preloads them). */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "lua/bind.h"

#ifndef SPK_SOURCE_LUA_DIR
#define SPK_SOURCE_LUA_DIR "lua"
#endif

int luaopen_spk_core(lua_State *L);
int luaopen_spk(lua_State *L);

static int has_init(const char *dir)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/spk/init.lua", dir);
    return access(path, R_OK) == 0;
}

/* Finds lua/ (the folder holding spk/init.lua): $SPK_LUA_DIR, then beside the
 * binary or module (build/../lua, or <prefix>/lua), then the source tree this
 * was built from. */
static int find_lua_dir(char *out, size_t size)
{
    const char *env = getenv("SPK_LUA_DIR");
    if (env && *env && has_init(env)) {
        snprintf(out, size, "%s", env);
        return 1;
    }
    char self[PATH_MAX] = "";
    Dl_info info;
    if (dladdr((void *)luaopen_spk_core, &info) && info.dli_fname && realpath(info.dli_fname, self) == NULL)
        self[0] = '\0';
    if (!self[0]) {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n > 0 ? n : 0] = '\0';
    }
    char *slash = strrchr(self, '/');
    if (slash) {
        *slash = '\0';
        const char *candidates[] = {"%s/../lua", "%s/lua", "%s/../share/spk/lua"};
        for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++) {
            char dir[PATH_MAX + 32];
            snprintf(dir, sizeof dir, candidates[i], self);
            char real[PATH_MAX];
            if (realpath(dir, real) && has_init(real)) {
                snprintf(out, size, "%s", real);
                return 1;
            }
        }
    }
    if (has_init(SPK_SOURCE_LUA_DIR)) {
        snprintf(out, size, "%s", SPK_SOURCE_LUA_DIR);
        return 1;
    }
    return 0;
}

int luaopen_spk_core(lua_State *L)
{
    lua_newtable(L);
    int module = lua_gettop(L);
    spk_open_tensor(L, module);
    spk_open_cuda(L, module);
    spk_open_lstm(L, module);
    spk_open_persistent(L, module);
    spk_open_cluster(L, module);
    spk_open_cudnn(L, module);
    spk_open_clock(L, module);
    char dir[PATH_MAX];
    if (find_lua_dir(dir, sizeof dir)) {
        lua_pushstring(L, dir);
        lua_setfield(L, module, "lua_dir");
    }
    return 1;
}

int luaopen_spk(lua_State *L)
{
    char dir[PATH_MAX];
    if (!find_lua_dir(dir, sizeof dir))
        return luaL_error(L, "spk: cannot find lua/spk/init.lua (set SPK_LUA_DIR to the folder holding spk/)");

    /* package.loaded["spk.core"] = the C table, so init.lua can require it. */
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_getfield(L, -1, "spk.core");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        luaopen_spk_core(L);
        lua_pushvalue(L, -1);
        lua_setfield(L, -3, "spk.core");
    }
    lua_pop(L, 2);

    /* Put lua/ first on package.path so spk.* Lua modules are found. */
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
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
