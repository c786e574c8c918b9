/* Lua bindings of the launch limits (src/cuda/launch_limits.h), in spk.cuda:
 * an architecture's limits, what each entry of a cubin uses, and the check
 * of a launch against both. No device is needed. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/launch_limits.h"
#include "lua/areas.h"

#define MAX_ENTRIES 64

static void check_arch(lua_State *L, int arg, spk_arch_limits *out)
{
    const char *arch = luaL_checkstring(L, arg);
    if (spk_arch_limits_of(arch, out) != 0)
        luaL_argerror(L, arg, spk_last_error());
}

static void push_triple(lua_State *L, const int64_t v[3])
{
    lua_createtable(L, 3, 0);
    for (int i = 0; i < 3; i++) {
        lua_pushinteger(L, (lua_Integer)v[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

static void push_int3(lua_State *L, const int v[3])
{
    int64_t w[3] = {v[0], v[1], v[2]};
    push_triple(L, w);
}

/* spk.cuda.launch_limits(arch) -> {cc, max_grid, max_block, ...} */
static int l_launch_limits(lua_State *L)
{
    spk_arch_limits lim;
    check_arch(L, 1, &lim);
    lua_createtable(L, 0, 11);
    lua_pushinteger(L, lim.cc), lua_setfield(L, -2, "cc");
    push_triple(L, lim.max_grid), lua_setfield(L, -2, "max_grid");
    push_int3(L, lim.max_block), lua_setfield(L, -2, "max_block");
    lua_pushinteger(L, lim.max_threads_per_block), lua_setfield(L, -2, "max_threads_per_block");
    lua_pushinteger(L, lim.max_cluster), lua_setfield(L, -2, "max_cluster");
    lua_pushinteger(L, lim.max_cluster_nonportable), lua_setfield(L, -2, "max_cluster_nonportable");
    lua_pushinteger(L, (lua_Integer)lim.max_smem_per_block), lua_setfield(L, -2, "max_smem_per_block");
    lua_pushinteger(L, (lua_Integer)lim.reserved_smem_per_block), lua_setfield(L, -2, "reserved_smem_per_block");
    lua_pushinteger(L, lim.max_regs_per_block), lua_setfield(L, -2, "max_regs_per_block");
    lua_pushinteger(L, lim.max_regs_per_thread), lua_setfield(L, -2, "max_regs_per_thread");
    lua_pushinteger(L, lim.reg_alloc_unit), lua_setfield(L, -2, "reg_alloc_unit");
    return 1;
}

static void push_usage(lua_State *L, const spk_entry_usage *u)
{
    lua_createtable(L, 0, 6);
    lua_pushstring(L, u->name), lua_setfield(L, -2, "name");
    lua_pushinteger(L, u->registers), lua_setfield(L, -2, "registers");
    lua_pushinteger(L, (lua_Integer)u->local_bytes), lua_setfield(L, -2, "local_bytes");
    lua_pushinteger(L, (lua_Integer)u->static_smem), lua_setfield(L, -2, "static_smem");
    push_int3(L, u->max_threads), lua_setfield(L, -2, "max_threads");
    push_int3(L, u->cluster_dims), lua_setfield(L, -2, "cluster_dims");
}

/* spk.cuda.cubin_entries(cubin, arch) -> {{name, registers, local_bytes, static_smem, max_threads,
 * cluster_dims}, ...} */
static int l_cubin_entries(lua_State *L)
{
    size_t size;
    const char *cubin = luaL_checklstring(L, 1, &size);
    spk_arch_limits lim;
    check_arch(L, 2, &lim);
    spk_entry_usage *u = lua_newuserdatauv(L, MAX_ENTRIES * sizeof *u, 0); /* freed with the stack */
    int n;
    if (spk_cubin_entries(cubin, size, lim.reserved_smem_per_block, u, MAX_ENTRIES, &n) != 0)
        return spk_lua_fail(L);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        push_usage(L, &u[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* The table at idx's field `key`, a size or a list {x[, y[, z]]} (missing
 * sizes 1), into v; absent: 1s, or 0s where `absent_zero` (no cluster). */
static void read_triple(lua_State *L, int idx, const char *key, bool absent_zero, int64_t v[3], const char *where)
{
    int type = spk_lua_rawfield(L, idx, key);
    v[0] = v[1] = v[2] = 1;
    if (type == LUA_TNIL) {
        if (absent_zero)
            v[0] = v[1] = v[2] = 0;
        lua_pop(L, 1);
        return;
    }
    if (type == LUA_TNUMBER && lua_isinteger(L, -1)) {
        v[0] = lua_tointeger(L, -1);
    } else if (type == LUA_TTABLE) {
        int n = spk_lua_rawcount(L, -1);
        if (n < 1 || n > 3)
            luaL_error(L, "%s: %s must list 1 to 3 sizes", where, key);
        for (int i = 0; i < n; i++) {
            lua_rawgeti(L, -1, i + 1);
            if (!lua_isinteger(L, -1))
                luaL_error(L, "%s: %s[%d] must be an integer", where, key, i + 1);
            v[i] = lua_tointeger(L, -1);
            lua_pop(L, 1);
        }
    } else {
        luaL_error(L, "%s: %s must be an integer or a list of 1 to 3, got %s", where, key, spk_lua_describe(L, -1));
    }
    lua_pop(L, 1);
    for (int i = 0; i < 3; i++)
        if (v[i] < 1)
            luaL_error(L, "%s: %s must be positive, got %lld", where, key, (long long)v[i]);
}

static void read_usage(lua_State *L, int idx, spk_entry_usage *u)
{
    memset(u, 0, sizeof *u);
    luaL_checktype(L, idx, LUA_TTABLE);
    if (spk_lua_rawfield(L, idx, "name") == LUA_TSTRING)
        snprintf(u->name, sizeof u->name, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    spk_lua_rawfield(L, idx, "registers");
    u->registers = (int)luaL_optinteger(L, -1, 0);
    lua_pop(L, 1);
    spk_lua_rawfield(L, idx, "static_smem");
    u->static_smem = (size_t)luaL_optinteger(L, -1, 0);
    lua_pop(L, 1);
    for (int k = 0; k < 2; k++) { /* {0, 0, 0} (as cubin_entries gives them) or sizes */
        int *dst = k == 0 ? u->max_threads : u->cluster_dims;
        if (spk_lua_rawfield(L, idx, k == 0 ? "max_threads" : "cluster_dims") == LUA_TTABLE) {
            for (int i = 0; i < 3; i++) {
                lua_rawgeti(L, -1, i + 1);
                lua_Integer v = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
                dst[i] = v < 0 ? 0 : v > INT32_MAX ? INT32_MAX : (int)v;
                lua_pop(L, 1);
            }
        }
        lua_pop(L, 1);
    }
}

/* spk.cuda.check_launch(arch, entry, launch[, what]) -> true */
static int l_check_launch(lua_State *L)
{
    static const char *const entry_keys[] = {"name", "registers", "local_bytes", "static_smem", "max_threads",
                                             "cluster_dims", NULL};
    static const char *const launch_keys[] = {"grid", "block", "smem", "cluster", "nonportable_cluster", NULL};
    spk_arch_limits lim;
    check_arch(L, 1, &lim);
    luaL_checktype(L, 2, LUA_TTABLE);
    luaL_checktype(L, 3, LUA_TTABLE);
    spk_lua_checkkeys(L, 2, entry_keys, "spk.cuda.check_launch: entry");
    spk_lua_checkkeys(L, 3, launch_keys, "spk.cuda.check_launch: launch");
    const char *what = luaL_optstring(L, 4, "launch");
    spk_entry_usage u;
    read_usage(L, 2, &u);
    spk_launch_request r = {0};
    read_triple(L, 3, "grid", false, r.grid, "spk.cuda.check_launch");
    read_triple(L, 3, "block", false, r.block, "spk.cuda.check_launch");
    read_triple(L, 3, "cluster", true, r.cluster, "spk.cuda.check_launch");
    spk_lua_rawfield(L, 3, "smem");
    lua_Integer smem = luaL_optinteger(L, -1, 0);
    lua_pop(L, 1);
    luaL_argcheck(L, smem >= 0, 3, "smem must be >= 0");
    r.dynamic_smem = (size_t)smem;
    spk_lua_rawfield(L, 3, "nonportable_cluster");
    r.nonportable_cluster = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (spk_launch_limits_check(&lim, &u, &r, what) != 0)
        return spk_lua_fail(L);
    lua_pushboolean(L, 1);
    return 1;
}

void spk_open_launch_limits(lua_State *L, int module)
{
    static const spk_lua_checked_reg functions[] = {
        {"launch_limits", l_launch_limits,
         "spk.cuda.launch_limits(arch) -> {cc, max_grid, max_block, max_threads_per_block, max_cluster,\n"
         "  max_cluster_nonportable, max_smem_per_block, reserved_smem_per_block, max_regs_per_block, ...}\n"
         "The launch limits of an architecture (\"sm_90\") known without a device (src/cuda/launch_limits.h).",
         "arch"},
        {"cubin_entries", l_cubin_entries,
         "spk.cuda.cubin_entries(cubin, arch) -> {{name, registers, local_bytes, static_smem, max_threads,\n"
         "  cluster_dims}, ...}\n"
         "What each kernel of a cubin (m:code() of an sm_XY module) uses: registers and local memory (spills,\n"
         "stack) per thread, its own static shared memory, its __launch_bounds__ and __cluster_dims__.",
         "cubin, arch"},
        {"check_launch", l_check_launch,
         "spk.cuda.check_launch(arch, entry, {grid =, block =, smem =, cluster =, nonportable_cluster =}[, what])\n"
         "  -> true\n"
         "Checks a launch of entry (one of cubin_entries) against arch's limits: grid, block, threads, cluster,\n"
         "shared memory, registers; an error names what is asked, the limit and the fix.",
         "arch, entry, launch, what"},
        {NULL, NULL, NULL, NULL},
    };
    spk_lua_rawfield(L, module, "cuda");
    spk_lua_setfuncs_module(L, functions, "spk.cuda");
    lua_pop(L, 1);
}
