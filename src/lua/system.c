/* What spk knows about its build and the machine it runs on, for the record
 * every results file carries (lua/spk/provenance.lua reads these; scripts
 * use spk.version and require "spk.provenance"), and whether a stream is a
 * terminal (lua/spk/progress.lua draws its line only there). The functions
 * are spk.core.system_*; nothing here decides anything. */
#include <stdio.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cuda_runtime_api.h> /* CUDART_VERSION: the toolkit spk is built with */
#include <lauxlib.h>
#include <lualib.h>

#include "build_info.h" /* SPK_COMMIT, SPK_DIRTY: made at build time (scripts/build_info.sh) */
#include "core/error.h"
#include "core/exit_status.h"
#include "core/version.h"
#include "cuda/cudnn_rnn.h"
#include "cuda/nvtx.h"
#include "cuda/runtime.h"
#include "lua/areas.h"
#include "lua/cuda_area.h"

static int system_build(lua_State *L)
{
    lua_createtable(L, 0, 5);
    spk_lua_setstring(L, "version", SPK_VERSION);
    spk_lua_setstring(L, "commit", SPK_COMMIT);
    if (SPK_DIRTY >= 0) { /* left out (nil) when unknown */
        lua_pushboolean(L, SPK_DIRTY > 0);
        lua_setfield(L, -2, "dirty");
    }
    spk_lua_setint(L, "cuda_toolkit_version", CUDART_VERSION);
    spk_lua_setint(L, "cudnn_header_version", (lua_Integer)spk_cudnn_header_version());
    return 1;
}

/* The current device's facts, or nothing when there is none. */
static void set_device(lua_State *L, const spk_cuda_info *info)
{
    int ordinal = 0;
    spk_device_props p;
    if (info->device_count <= 0 || spk_device_current(&ordinal) != 0 || spk_device_props_get(ordinal, &p) != 0) {
        spk_clear_error();
        return;
    }
    lua_createtable(L, 0, 5);
    spk_lua_setint(L, "ordinal", p.ordinal);
    spk_lua_setstring(L, "name", p.name);
    lua_pushfstring(L, "%d.%d", p.cc_major, p.cc_minor);
    lua_setfield(L, -2, "cc");
    spk_lua_setint(L, "sms", p.sms);
    spk_lua_setint(L, "memory_bytes", (lua_Integer)p.global_mem_bytes);
    lua_setfield(L, -2, "device");
}

static int system_environment(lua_State *L)
{
    spk_cuda_info info;
    spk_lua_push_cuda_versions(L, &info, 10);
    spk_lua_setint(L, "cudnn_version", (lua_Integer)spk_cudnn_version());
    spk_lua_setint(L, "device_count", info.device_count);
    if (info.error[0])
        spk_lua_setstring(L, "device_error", info.error);
    set_device(L, &info);
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) == 0 && host[0])
        spk_lua_setstring(L, "host", host);
    struct utsname u;
    if (uname(&u) == 0) {
        lua_pushfstring(L, "%s %s %s", u.sysname, u.release, u.machine);
        lua_setfield(L, -2, "os");
    }
    return 1;
}

/* A Lua file handle (io.stderr) or a descriptor number. */
static int system_isatty(lua_State *L)
{
    int fd = -1;
    luaL_Stream *stream = luaL_testudata(L, 1, LUA_FILEHANDLE);
    if (stream) {
        if (stream->closef == NULL || stream->f == NULL)
            return luaL_argerror(L, 1, "the file is closed");
        fd = fileno(stream->f);
    } else if (lua_isinteger(L, 1)) {
        fd = (int)lua_tointeger(L, 1);
    } else {
        return luaL_argerror(L, 1, lua_pushfstring(L, "a file (io.stderr) or a descriptor number expected, got %s",
                                                   spk_lua_describe(L, 1)));
    }
    lua_pushboolean(L, fd >= 0 && isatty(fd));
    return 1;
}

/* The ranges pushed since the last reset, as {name = count}, with the pushes
 * still open as `open` (src/cuda/nvtx.h: what the specs check). */
static int system_nvtx_counts(lua_State *L)
{
    int reset = lua_toboolean(L, 1);
    lua_newtable(L);
    for (int i = 0;; i++) {
        const char *name;
        long count;
        if (spk_nvtx_count(i, &name, &count) != 0)
            break;
        spk_lua_setint(L, name, count);
    }
    spk_lua_setint(L, "open", spk_nvtx_depth());
    lua_pushboolean(L, spk_nvtx_enabled());
    if (reset)
        spk_nvtx_reset_counts();
    return 2;
}

/* Ranges on or off from now on; the previous setting. */
static int system_nvtx_enable(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TBOOLEAN);
    int was = spk_nvtx_set_enabled(lua_toboolean(L, 1));
    if (was < 0)
        return spk_lua_fail(L);
    lua_pushboolean(L, was);
    return 1;
}

/* fn() inside a range of a script's own; the range closes however fn ends,
 * and an error passes through. */
static int system_nvtx_range(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_settop(L, 2);
    spk_nvtx_push(name);
    int status = lua_pcall(L, 0, LUA_MULTRET, 0);
    spk_nvtx_pop();
    if (status != LUA_OK)
        return lua_error(L);
    return lua_gettop(L) - 1;
}

void spk_open_system(lua_State *L, int module)
{
    static const spk_lua_checked_reg functions[] = {
        {"system_build", system_build,
         "spk.core.system_build() -> {version, commit, dirty, cuda_toolkit_version, cudnn_header_version}\n"
         "What this build is: spk's version, the git commit it was built from (\"unknown\" outside git), and\n"
         "whether tracked files differed from it (dirty; nil when unknown). spk.version reads it.",
         ""},
        {"system_environment", system_environment,
         "spk.core.system_environment() -> {runtime_version, driver_version, nvrtc_version, cudnn_version,\n"
         "    device_count, device = {name, cc, sms, memory_bytes, ordinal}, device_error, host, os}\n"
         "The machine's GPU stack and host, never an error (no device: no `device`, the reason in device_error).\n"
         "require \"spk.provenance\" turns it into the record results files carry.",
         ""},
        {"system_isatty", system_isatty,
         "spk.core.system_isatty(file | fd) -> boolean\n"
         "Whether the file (io.stderr) or descriptor is a terminal (spk.progress draws its line only there).",
         "file"},
        {"system_nvtx_counts", system_nvtx_counts,
         "spk.core.system_nvtx_counts([reset]) -> {name = pushes, open = depth}, enabled\n"
         "How often each NVTX range was pushed since the last reset (src/cuda/nvtx.h), the ranges still open,\n"
         "and whether ranges are emitted ($SPK_NVTX=0 turns them off); reset = true starts the counts again.",
         "reset"},
        {"system_nvtx_enable", system_nvtx_enable,
         "spk.core.system_nvtx_enable(on) -> was_on\n"
         "Turns NVTX ranges on or off from now on (spk.nvtx.enable); an error while a range is open.",
         "on"},
        {"system_nvtx_range", system_nvtx_range,
         "spk.core.system_nvtx_range(name, fn) -> fn's results\n"
         "Calls fn() inside an NVTX range in the domain \"spk\", closed however fn ends (spk.nvtx.range).",
         "name, fn"},
        {NULL, NULL, NULL, NULL},
    };
    spk_lua_register(L, module, functions, "spk.core");

    /* spk.core.system_exit_status: the statuses of core/exit_status.h (spk.options.EXIT) */
    lua_createtable(L, 0, 4);
    spk_lua_setint(L, "ok", SPK_EXIT_OK);
    spk_lua_setint(L, "error", SPK_EXIT_ERROR);
    spk_lua_setint(L, "usage", SPK_EXIT_USAGE);
    spk_lua_setint(L, "no_gpu", SPK_EXIT_NO_GPU);
    lua_setfield(L, module, "system_exit_status");
}
