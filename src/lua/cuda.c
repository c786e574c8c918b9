/* Lua bindings of the GPU runtime (src/cuda/runtime.h): spk.core.cuda and
 * spk.core.blas, the userdata types stream, event, graph, module, kernel and
 * scalar, and the tensor methods :cuda(), :cpu() and :to("cuda"|"cpu").
 * lua/spk/cuda.lua builds the friendly API (spk.cuda, spk.blas, spk.u32 ...)
 * on top. Device ordinals are 0-based, as in t.device == "cuda:0". */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "cuda/ptx.h"
#include "cuda/runtime.h"
#include "lua/bind.h"

#define STREAM_MT "spk.cuda.stream"
#define EVENT_MT "spk.cuda.event"
#define GRAPH_MT "spk.cuda.graph"
#define MODULE_MT "spk.cuda.module"
#define KERNEL_MT "spk.cuda.kernel"
#define SCALAR_MT "spk.cuda.scalar"

typedef struct { spk_stream *s; } lua_stream;
typedef struct { spk_event *e; } lua_event;
typedef struct { spk_graph *g; } lua_graph;
typedef struct { spk_module *m; } lua_module;
typedef struct { spk_kernel *k; } lua_kernel;

/* ---- userdata plumbing ------------------------------------------------- */

static void *check_open(lua_State *L, int idx, const char *mt, const char *what)
{
    void **u = luaL_checkudata(L, idx, mt);
    if (!*u)
        luaL_argerror(L, idx, lua_pushfstring(L, "%s is closed", what));
    return *u;
}

static spk_stream *opt_stream(lua_State *L, int idx)
{
    if (lua_isnoneornil(L, idx))
        return NULL;
    return check_open(L, idx, STREAM_MT, "stream");
}

/* The stream in field `stream` of the table at idx (nil: default). */
static spk_stream *field_stream(lua_State *L, int idx, const char *key)
{
    spk_lua_rawfield(L, idx, key);
    spk_stream *s = NULL;
    if (!lua_isnil(L, -1)) {
        lua_stream *u = luaL_testudata(L, -1, STREAM_MT);
        if (!u || !u->s)
            luaL_error(L, "%s must be an open spk.cuda stream, got %s", key, luaL_typename(L, -1));
        s = u->s;
    }
    lua_pop(L, 1);
    return s;
}

#define CHECK_OK(L, call)                                                        \
    do {                                                                         \
        if ((call) != 0)                                                         \
            return spk_lua_fail(L);                                              \
    } while (0)

/* ---- availability and devices ------------------------------------------ */

static int l_available(lua_State *L)
{
    spk_lua_noextra(L, 0);
    lua_pushboolean(L, spk_cuda_available());
    return 1;
}

static int l_require(lua_State *L)
{
    spk_lua_noextra(L, 0);
    CHECK_OK(L, spk_cuda_require());
    return 0;
}

static void push_props(lua_State *L, const spk_device_props *p)
{
    lua_createtable(L, 0, 24);
#define SETI(key, v) (lua_pushinteger(L, (lua_Integer)(v)), lua_setfield(L, -2, key))
    SETI("index", p->ordinal);
    lua_pushstring(L, p->name);
    lua_setfield(L, -2, "name");
    lua_pushfstring(L, "%d.%d", p->cc_major, p->cc_minor);
    lua_setfield(L, -2, "cc");
    SETI("cc_major", p->cc_major);
    SETI("cc_minor", p->cc_minor);
    SETI("sms", p->sms);
    SETI("warp_size", p->warp_size);
    SETI("threads_per_sm", p->max_threads_per_sm);
    SETI("threads_per_block", p->max_threads_per_block);
    SETI("blocks_per_sm", p->max_blocks_per_sm);
    SETI("regs_per_sm", p->regs_per_sm);
    SETI("regs_per_block", p->regs_per_block);
    SETI("smem_per_sm", p->smem_per_sm);
    SETI("smem_per_block", p->smem_per_block);
    SETI("smem_per_block_optin", p->smem_per_block_optin);
    SETI("l2_bytes", p->l2_bytes);
    SETI("memory_bytes", p->global_mem_bytes);
    SETI("clock_khz", p->clock_khz);
    SETI("memory_clock_khz", p->memory_clock_khz);
    SETI("memory_bus_bits", p->memory_bus_bits);
#undef SETI
    lua_pushboolean(L, p->cooperative_launch);
    lua_setfield(L, -2, "cooperative");
    lua_pushboolean(L, p->cluster_launch);
    lua_setfield(L, -2, "cluster");
}

static int l_device(lua_State *L)
{
    spk_lua_noextra(L, 1);
    int ordinal;
    if (lua_isnoneornil(L, 1))
        CHECK_OK(L, spk_device_current(&ordinal));
    else
        ordinal = (int)luaL_checkinteger(L, 1);
    spk_device_props p;
    CHECK_OK(L, spk_device_props_get(ordinal, &p));
    push_props(L, &p);
    return 1;
}

static int l_devices(lua_State *L)
{
    spk_lua_noextra(L, 0);
    int n;
    CHECK_OK(L, spk_device_count(&n));
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        spk_device_props p;
        CHECK_OK(L, spk_device_props_get(i, &p));
        push_props(L, &p);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int l_set_device(lua_State *L)
{
    spk_lua_noextra(L, 1);
    CHECK_OK(L, spk_device_set((int)luaL_checkinteger(L, 1)));
    return 0;
}

static int l_current_device(lua_State *L)
{
    spk_lua_noextra(L, 0);
    int d;
    CHECK_OK(L, spk_device_current(&d));
    lua_pushinteger(L, d);
    return 1;
}

static int l_synchronize(lua_State *L)
{
    spk_lua_noextra(L, 0);
    CHECK_OK(L, spk_device_synchronize());
    return 0;
}

static int l_info(lua_State *L)
{
    spk_lua_noextra(L, 0);
    spk_cuda_info info;
    spk_cuda_get_info(&info);
    lua_createtable(L, 0, 8);
    lua_pushinteger(L, info.runtime_version);
    lua_setfield(L, -2, "runtime_version");
    lua_pushinteger(L, info.driver_version);
    lua_setfield(L, -2, "driver_version");
    lua_pushfstring(L, "%d.%d", info.nvrtc_major, info.nvrtc_minor);
    lua_setfield(L, -2, "nvrtc_version");
    lua_pushboolean(L, info.device_count > 0);
    lua_setfield(L, -2, "available");
    lua_createtable(L, info.device_count, 0);
    for (int i = 0; i < info.device_count; i++) {
        spk_device_props p;
        if (spk_device_props_get(i, &p) == 0) {
            push_props(L, &p);
            lua_rawseti(L, -2, i + 1);
        }
    }
    lua_setfield(L, -2, "devices");
    if (info.error[0]) {
        lua_pushstring(L, info.error);
        lua_setfield(L, -2, "error");
    }
    return 1;
}

/* ---- streams ----------------------------------------------------------- */

static void push_stream(lua_State *L, spk_stream *s)
{
    lua_stream *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->s = s;
    luaL_setmetatable(L, STREAM_MT);
}

static int l_stream(lua_State *L)
{
    spk_lua_noextra(L, 0);
    spk_stream *s = spk_stream_new();
    if (!s)
        return spk_lua_fail(L);
    push_stream(L, s);
    return 1;
}

static int l_default_stream(lua_State *L)
{
    spk_lua_noextra(L, 0);
    spk_stream *s = spk_stream_default();
    if (!s)
        return spk_lua_fail(L);
    push_stream(L, s); /* release is a no-op on the default stream */
    return 1;
}

static int stream_close(lua_State *L)
{
    lua_stream *u = luaL_checkudata(L, 1, STREAM_MT);
    if (u->s) {
        spk_stream_release(u->s);
        u->s = NULL;
    }
    return 0;
}

static int stream_synchronize(lua_State *L)
{
    check_open(L, 1, STREAM_MT, "stream"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 1);
    CHECK_OK(L, spk_stream_synchronize(check_open(L, 1, STREAM_MT, "stream")));
    return 0;
}

static int stream_query(lua_State *L)
{
    check_open(L, 1, STREAM_MT, "stream"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 1);
    bool done;
    CHECK_OK(L, spk_stream_query(check_open(L, 1, STREAM_MT, "stream"), &done));
    lua_pushboolean(L, done);
    return 1;
}

static int stream_wait(lua_State *L)
{
    check_open(L, 1, STREAM_MT, "stream"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 2);
    spk_stream *s = check_open(L, 1, STREAM_MT, "stream");
    CHECK_OK(L, spk_stream_wait_event(s, check_open(L, 2, EVENT_MT, "event")));
    return 0;
}

static int stream_tostring(lua_State *L)
{
    lua_stream *u = luaL_checkudata(L, 1, STREAM_MT);
    if (!u->s)
        lua_pushstring(L, "spk.cuda.stream (closed)");
    else
        lua_pushfstring(L, "spk.cuda.stream (cuda:%d, %p)", spk_stream_device(u->s), spk_stream_handle(u->s));
    return 1;
}

/* ---- events ------------------------------------------------------------ */

static int l_event(lua_State *L)
{
    spk_lua_noextra(L, 1);
    bool timing = lua_isnoneornil(L, 1) ? true : lua_toboolean(L, 1);
    spk_event *e = spk_event_new(timing);
    if (!e)
        return spk_lua_fail(L);
    lua_event *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->e = e;
    luaL_setmetatable(L, EVENT_MT);
    return 1;
}

static int event_close(lua_State *L)
{
    lua_event *u = luaL_checkudata(L, 1, EVENT_MT);
    spk_event_free(u->e);
    u->e = NULL;
    return 0;
}

static int event_record(lua_State *L)
{
    check_open(L, 1, EVENT_MT, "event"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 2);
    spk_event *e = check_open(L, 1, EVENT_MT, "event");
    CHECK_OK(L, spk_event_record(e, opt_stream(L, 2)));
    lua_settop(L, 1);
    return 1;
}

static int event_synchronize(lua_State *L)
{
    check_open(L, 1, EVENT_MT, "event"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 1);
    CHECK_OK(L, spk_event_synchronize(check_open(L, 1, EVENT_MT, "event")));
    return 0;
}

static int event_query(lua_State *L)
{
    check_open(L, 1, EVENT_MT, "event"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 1);
    bool done;
    CHECK_OK(L, spk_event_query(check_open(L, 1, EVENT_MT, "event"), &done));
    lua_pushboolean(L, done);
    return 1;
}

static int event_tostring(lua_State *L)
{
    lua_event *u = luaL_checkudata(L, 1, EVENT_MT);
    if (!u->e)
        lua_pushstring(L, "spk.cuda.event (closed)");
    else
        lua_pushfstring(L, "spk.cuda.event (%p)", (void *)u->e);
    return 1;
}

/* start:elapsed(stop) -> milliseconds from start to stop. */
static int event_elapsed(lua_State *L)
{
    check_open(L, 1, EVENT_MT, "event"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 2);
    float ms;
    spk_event *start = check_open(L, 1, EVENT_MT, "event"); /* in order: self's error first */
    spk_event *stop = check_open(L, 2, EVENT_MT, "event");
    CHECK_OK(L, spk_event_elapsed_ms(start, stop, &ms));
    lua_pushnumber(L, ms);
    return 1;
}

/* ---- graphs ------------------------------------------------------------ */

static int l_capture_begin(lua_State *L)
{
    spk_lua_noextra(L, 1);
    CHECK_OK(L, spk_graph_capture_begin(opt_stream(L, 1)));
    return 0;
}

static int l_capture_abort(lua_State *L)
{
    spk_lua_noextra(L, 1);
    spk_graph_capture_abort(opt_stream(L, 1));
    return 0;
}

static int l_capture_end(lua_State *L)
{
    spk_lua_noextra(L, 1);
    spk_graph *g = spk_graph_capture_end(opt_stream(L, 1));
    if (!g)
        return spk_lua_fail(L);
    lua_graph *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->g = g;
    luaL_setmetatable(L, GRAPH_MT);
    return 1;
}

static int graph_close(lua_State *L)
{
    lua_graph *u = luaL_checkudata(L, 1, GRAPH_MT);
    spk_graph_free(u->g);
    u->g = NULL;
    return 0;
}

static int graph_replay(lua_State *L)
{
    check_open(L, 1, GRAPH_MT, "graph"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 2);
    CHECK_OK(L, spk_graph_replay(check_open(L, 1, GRAPH_MT, "graph"), opt_stream(L, 2)));
    return 0;
}

static int graph_nodes(lua_State *L)
{
    check_open(L, 1, GRAPH_MT, "graph"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 1);
    size_t n;
    CHECK_OK(L, spk_graph_node_count(check_open(L, 1, GRAPH_MT, "graph"), &n));
    lua_pushinteger(L, (lua_Integer)n);
    return 1;
}

/* ---- tensors ----------------------------------------------------------- */

/* t:cuda([stream]) */
static int tensor_cuda(lua_State *L)
{
    spk_lua_checktensor(L, 1); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 2);
    spk_tensor *t = spk_lua_checktensor(L, 1);
    spk_stream *s = opt_stream(L, 2);
    if (spk_tensor_is_device(t)) {
        lua_settop(L, 1);
        return 1;
    }
    spk_lua_pushtensor(L, spk_tensor_to_device(t, s));
    return 1;
}

/* t:cpu([stream]) */
static int tensor_cpu(lua_State *L)
{
    spk_lua_checktensor(L, 1); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 2);
    spk_tensor *t = spk_lua_checktensor(L, 1);
    spk_stream *s = opt_stream(L, 2);
    if (!spk_tensor_is_device(t)) {
        lua_settop(L, 1);
        return 1;
    }
    spk_lua_pushtensor(L, spk_tensor_to_host(t, s));
    return 1;
}

/* t:to("cuda" | "cuda:N" | "cpu", [stream]), reached through t:to(). */
static int tensor_to_device(lua_State *L)
{
    spk_lua_checktensor(L, 1); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 3);
    spk_lua_checktensor(L, 1);
    const char *name = luaL_checkstring(L, 2);
    lua_settop(L, 3);
    lua_remove(L, 2); /* t, stream */
    if (strcmp(name, "cpu") == 0 || strcmp(name, "host") == 0)
        return tensor_cpu(L);
    if (strcmp(name, "cuda") == 0)
        return tensor_cuda(L);
    if (strncmp(name, "cuda:", 5) == 0) {
        int current;
        CHECK_OK(L, spk_device_current(&current));
        int want = atoi(name + 5);
        if (want != current)
            return luaL_error(L, "to: %s is not the current device cuda:%d (use spk.cuda.set_device(%d))", name,
                              current, want);
        return tensor_cuda(L);
    }
    return luaL_error(L, "to: unknown dtype or device '%s' (devices: \"cuda\", \"cuda:N\", \"cpu\")", name);
}

/* spk.cuda.empty / zeros(shape table, dtype[, stream]): a zero-filled device tensor. */
static int l_zeros(lua_State *L)
{
    spk_lua_noextra(L, 3);
    luaL_checktype(L, 1, LUA_TTABLE);
    int ndim = spk_lua_rawcount(L, 1);
    if (ndim > SPK_MAX_DIMS)
        return luaL_argerror(L, 1, "too many dimensions");
    int64_t shape[SPK_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        lua_rawgeti(L, 1, i + 1);
        shape[i] = (int64_t)luaL_checkinteger(L, -1);
        lua_pop(L, 1);
    }
    spk_dtype dtype = SPK_F32;
    if (!lua_isnoneornil(L, 2) && spk_dtype_from_name(luaL_checkstring(L, 2), &dtype))
        return spk_lua_fail(L);
    spk_lua_pushtensor(L, spk_device_tensor_new(dtype, ndim, shape, opt_stream(L, 3)));
    return 1;
}

/* ---- compile ----------------------------------------------------------- */

/* A string field; the value stays on the stack (popped by the caller) so
 * that it stays alive whatever happens to the table. */
static const char *opt_string_field(lua_State *L, int idx, const char *key, const char *where)
{
    spk_lua_rawfield(L, idx, key);
    if (lua_isnil(L, -1))
        return NULL;
    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "%s: %s must be a string, got %s", where, key, luaL_typename(L, -1));
    size_t len;
    const char *v = lua_tolstring(L, -1, &len);
    if (strlen(v) != len) /* NVRTC and the file system would stop reading at the NUL */
        luaL_error(L, "%s: %s holds a NUL byte at offset %d (of %d)", where, key, (int)strlen(v), (int)len);
    return v;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(((const spk_define *)a)->name, ((const spk_define *)b)->name);
}

static int l_compile(lua_State *L)
{
    spk_lua_noextra(L, 1);
    luaL_checktype(L, 1, LUA_TTABLE);
    static const char *const known[] = {"source", "file", "defines", "options", "arch", "cache", NULL};
    spk_lua_checkkeys(L, 1, known, "compile");
    /* Every string used is kept alive on the stack (source, file, arch at 2, 3, 4)
     * or in the holder table at 5, whatever happens to the caller's tables. */
    lua_settop(L, 1);
    spk_compile_options o = {0};
    o.source = opt_string_field(L, 1, "source", "compile");
    o.file = opt_string_field(L, 1, "file", "compile");
    o.arch = opt_string_field(L, 1, "arch", "compile");
    if (!o.source == !o.file)
        return luaL_error(L, "compile: give exactly one of source = and file =");
    spk_lua_rawfield(L, 1, "cache");
    o.no_cache = !lua_isnil(L, -1) && !lua_toboolean(L, -1);
    lua_pop(L, 1);

    lua_newtable(L);
    int holder = 5, held = 0;
    spk_lua_rawfield(L, 1, "defines");
    int nd = 0;
    if (!lua_isnil(L, -1)) {
        luaL_checktype(L, -1, LUA_TTABLE);
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            nd++;
            lua_pop(L, 1);
        }
    }
    spk_define *defs = lua_newuserdatauv(L, (size_t)(nd ? nd : 1) * sizeof *defs, 0);
    lua_rawseti(L, holder, ++held);
    int i = 0;
    if (nd) {
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            if (lua_type(L, -2) != LUA_TSTRING)
                return luaL_error(L, "compile: defines must map names to values");
            defs[i].name = lua_tostring(L, -2);
            lua_pushvalue(L, -2);
            lua_rawseti(L, holder, ++held);
            if (lua_type(L, -1) == LUA_TBOOLEAN) {
                if (!lua_toboolean(L, -1)) { /* NAME = false: not defined */
                    lua_pop(L, 1);
                    continue;
                }
                defs[i].value = NULL;
            } else if (lua_type(L, -1) == LUA_TNUMBER || lua_type(L, -1) == LUA_TSTRING) {
                lua_pushvalue(L, -1);
                defs[i].value = lua_tostring(L, -1); /* numbers become text */
                lua_rawseti(L, holder, ++held);
            } else {
                return luaL_error(L, "compile: define %s must be a string, number or boolean", defs[i].name);
            }
            i++;
            lua_pop(L, 1);
        }
        qsort(defs, (size_t)i, sizeof *defs, compare_names); /* same key whatever the table order */
    }
    o.defines = defs;
    o.ndefines = i;
    lua_pop(L, 1);

    spk_lua_rawfield(L, 1, "options");
    int no = lua_isnil(L, -1) ? 0 : (luaL_checktype(L, -1, LUA_TTABLE), spk_lua_rawcount(L, -1));
    const char **opts = lua_newuserdatauv(L, (size_t)(no ? no : 1) * sizeof *opts, 0);
    lua_rawseti(L, holder, ++held);
    for (int j = 0; j < no; j++) {
        lua_rawgeti(L, -1, j + 1);
        if (lua_type(L, -1) != LUA_TSTRING || strlen(lua_tostring(L, -1)) != lua_rawlen(L, -1))
            return luaL_error(L, "compile: options[%d] must be a string without a NUL byte", j + 1);
        opts[j] = lua_tostring(L, -1);
        lua_rawseti(L, holder, ++held);
    }
    o.options = opts;
    o.noptions = no;

    spk_module *m = spk_compile(&o);
    if (!m)
        return spk_lua_fail(L);
    lua_module *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->m = m;
    luaL_setmetatable(L, MODULE_MT);
    return 1;
}

static int module_close(lua_State *L)
{
    lua_module *u = luaL_checkudata(L, 1, MODULE_MT);
    spk_module_release(u->m);
    u->m = NULL;
    return 0;
}

static int module_code(lua_State *L)
{
    check_open(L, 1, MODULE_MT, "module"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 1);
    spk_module *m = check_open(L, 1, MODULE_MT, "module");
    size_t bytes;
    const char *code = spk_module_code(m, &bytes);
    /* PTX carries its terminating NUL; Lua strings need not. */
    if (spk_module_is_ptx(m) && bytes && code[bytes - 1] == '\0')
        bytes--;
    lua_pushlstring(L, code, bytes);
    lua_pushinteger(L, (lua_Integer)bytes);
    return 2;
}

static int module_kernel(lua_State *L)
{
    check_open(L, 1, MODULE_MT, "module"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 2);
    check_open(L, 1, MODULE_MT, "module");
    const char *name = luaL_checkstring(L, 2); /* a number made a string allocates: the module is taken after */
    spk_kernel *k = spk_module_kernel(check_open(L, 1, MODULE_MT, "module"), name);
    if (!k)
        return spk_lua_fail(L);
    lua_kernel *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->k = k;
    luaL_setmetatable(L, KERNEL_MT);
    return 1;
}

/* m:params(name): the parameters of a kernel of a PTX module, read from the
 * PTX (no device needed). */
static int module_params(lua_State *L)
{
    check_open(L, 1, MODULE_MT, "module"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 2);
    const char *name = luaL_checkstring(L, 2);
    spk_ptx_param *params = lua_newuserdatauv(L, sizeof *params * SPK_PTX_MAX_PARAMS, 0);
    spk_module *m = check_open(L, 1, MODULE_MT, "module"); /* after the allocation */
    if (!spk_module_is_ptx(m))
        return luaL_error(L, "m:params: the module is a %s cubin; compile with arch = \"compute_XY\" for its PTX",
                          spk_module_arch(m));
    size_t bytes;
    const char *code = spk_module_code(m, &bytes);
    int n = 0;
    CHECK_OK(L, spk_ptx_entry_params(code, bytes, name, params, SPK_PTX_MAX_PARAMS, &n));
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_createtable(L, 0, 4);
        lua_pushstring(L, params[i].type), lua_setfield(L, -2, "type");
        lua_pushinteger(L, (lua_Integer)params[i].size), lua_setfield(L, -2, "size");
        lua_pushinteger(L, params[i].elements), lua_setfield(L, -2, "elements");
        lua_pushstring(L, params[i].name), lua_setfield(L, -2, "name");
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

spk_module *spk_lua_checkmodule(lua_State *L, int idx) { return check_open(L, idx, MODULE_MT, "module"); }

static int module_index(lua_State *L)
{
    spk_module *m = check_open(L, 1, MODULE_MT, "module");
    if (lua_type(L, 2) != LUA_TSTRING)
        return 0;
    const char *key = lua_tostring(L, 2);
    if (strcmp(key, "ptx") == 0) {
        if (!spk_module_is_ptx(m))
            return 0;
        lua_settop(L, 1);
        module_code(L);
        lua_pop(L, 1);
        return 1;
    }
    if (strcmp(key, "arch") == 0)
        lua_pushstring(L, spk_module_arch(m));
    else if (strcmp(key, "key") == 0)
        lua_pushstring(L, spk_module_key(m));
    else if (strcmp(key, "log") == 0)
        lua_pushstring(L, spk_module_log(m));
    else if (strcmp(key, "cached") == 0)
        lua_pushboolean(L, spk_module_from_cache(m));
    else if (strcmp(key, "size") == 0) {
        size_t bytes;
        spk_module_code(m, &bytes);
        lua_pushinteger(L, (lua_Integer)bytes);
    } else if (strcmp(key, "format") == 0)
        lua_pushstring(L, spk_module_is_ptx(m) ? "ptx" : "cubin");
    else {
        luaL_getmetatable(L, MODULE_MT);
        spk_lua_rawfield(L, -1, "methods");
        spk_lua_rawfield(L, -1, key);
    }
    return 1;
}

static int module_tostring(lua_State *L)
{
    lua_module *u = luaL_checkudata(L, 1, MODULE_MT);
    if (!u->m) {
        lua_pushstring(L, "spk.cuda.module (closed)");
        return 1;
    }
    size_t bytes;
    spk_module_code(u->m, &bytes);
    lua_pushfstring(L, "spk.cuda.module (%s, %s, %d bytes%s)", spk_module_arch(u->m),
                    spk_module_is_ptx(u->m) ? "ptx" : "cubin", (int)bytes, spk_module_from_cache(u->m) ? ", cached" : "");
    return 1;
}

static int l_cache_info(lua_State *L)
{
    spk_lua_noextra(L, 0);
    spk_cache_info info;
    CHECK_OK(L, spk_cache_get_info(&info));
    lua_createtable(L, 0, 7);
    lua_pushstring(L, info.dir);
    lua_setfield(L, -2, "dir");
    lua_pushboolean(L, info.writable);
    lua_setfield(L, -2, "writable");
    lua_pushinteger(L, info.entries);
    lua_setfield(L, -2, "entries");
    lua_pushinteger(L, (lua_Integer)info.bytes);
    lua_setfield(L, -2, "bytes");
    lua_pushinteger(L, info.hits);
    lua_setfield(L, -2, "hits");
    lua_pushinteger(L, info.misses);
    lua_setfield(L, -2, "misses");
    lua_pushinteger(L, info.rejected);
    lua_setfield(L, -2, "rejected");
    return 1;
}

static int l_cache_clear(lua_State *L)
{
    spk_lua_noextra(L, 0);
    CHECK_OK(L, spk_cache_clear());
    return 0;
}

/* spk.cuda.set_cache_dir(dir | nil): a folder for this session's cache
 * (nil: back to $SPK_CACHE_DIR or the per-user default). Resets counters. */
static int l_set_cache_dir(lua_State *L)
{
    spk_lua_noextra(L, 1);
    spk_cache_set_dir(luaL_optstring(L, 1, NULL));
    return 0;
}

static int l_set_kernel_dir(lua_State *L)
{
    spk_lua_noextra(L, 1);
    const char *dir = luaL_checkstring(L, 1);
    struct stat st;
    bool ok = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
    if (ok)
        spk_set_kernel_dir(dir);
    lua_pushboolean(L, ok);
    return 1;
}

static int l_kernel_dir(lua_State *L)
{
    spk_lua_noextra(L, 0);
    const char *dir = spk_kernel_dir();
    if (!dir)
        return luaL_error(L, "spk.cuda.kernel_dir: %s", spk_last_error());
    lua_pushstring(L, dir);
    return 1;
}

/* spk.cuda.sha256(text) -> 64 hex digits (the hash the kernel cache uses). */
static int l_sha256(lua_State *L)
{
    spk_lua_noextra(L, 1);
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    uint8_t digest[32];
    spk_sha256(text, len, digest);
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    lua_pushlstring(L, hex, 64);
    return 1;
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool is_kernel_source(const char *name)
{
    size_t n = strlen(name);
    return (n > 3 && strcmp(name + n - 3, ".cu") == 0) || (n > 4 && strcmp(name + n - 4, ".cuh") == 0);
}

/* spk.cuda.kernel_files([dir]) -> sorted names of the *.cu and *.cuh files in
 * dir (default: the kernel folder), so a script can hash the kernel sources. */
static int l_kernel_files(lua_State *L)
{
    spk_lua_noextra(L, 1);
    const char *dir = lua_isnoneornil(L, 1) ? spk_kernel_dir() : luaL_checkstring(L, 1);
    if (!dir)
        return luaL_error(L, "spk.cuda.kernel_files: %s", spk_last_error());
    DIR *d = opendir(dir);
    if (!d)
        return luaL_error(L, "spk.cuda.kernel_files: cannot read the folder %s", dir);
    lua_newtable(L);
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !is_kernel_source(e->d_name))
            continue;
        lua_pushstring(L, e->d_name);
        lua_rawseti(L, -2, ++count);
    }
    closedir(d);
    const char **names = malloc(sizeof *names * (size_t)(count ? count : 1));
    if (!names)
        return luaL_error(L, "spk.cuda.kernel_files: out of memory");
    for (int i = 0; i < count; i++) {
        lua_rawgeti(L, -1, i + 1);
        names[i] = lua_tostring(L, -1); /* kept alive by the table until it is rewritten */
        lua_pop(L, 1);
    }
    qsort(names, (size_t)count, sizeof *names, compare_strings);
    lua_createtable(L, count, 0);
    for (int i = 0; i < count; i++) {
        lua_pushstring(L, names[i]);
        lua_rawseti(L, -2, i + 1);
    }
    free(names);
    return 1;
}

/* ---- scalars and arguments --------------------------------------------- */

static int make_scalar(lua_State *L, spk_arg_kind kind)
{
    spk_lua_noextra(L, 1);
    spk_arg a = {.kind = kind};
    switch (kind) {
    case SPK_ARG_F32:
        a.v.f32 = (float)luaL_checknumber(L, 1);
        break;
    case SPK_ARG_F64:
        a.v.f64 = luaL_checknumber(L, 1);
        break;
    default: {
        lua_Integer n = luaL_checkinteger(L, 1);
        if (kind == SPK_ARG_U32 && (n < 0 || n > 0xffffffffLL))
            return luaL_argerror(L, 1, "u32 out of range [0, 4294967295]");
        if (kind == SPK_ARG_I32 && (n < -2147483648LL || n > 2147483647LL))
            return luaL_argerror(L, 1, "i32 out of range");
        if (kind == SPK_ARG_U64 && n < 0)
            return luaL_argerror(L, 1, "u64 must not be negative");
        if (kind == SPK_ARG_U32)
            a.v.u32 = (uint32_t)n;
        else if (kind == SPK_ARG_I32)
            a.v.i32 = (int32_t)n;
        else if (kind == SPK_ARG_U64)
            a.v.u64 = (uint64_t)n;
        else
            a.v.i64 = (int64_t)n;
    }
    }
    spk_arg *u = lua_newuserdatauv(L, sizeof *u, 0);
    *u = a;
    luaL_setmetatable(L, SCALAR_MT);
    return 1;
}

static int l_u32(lua_State *L) { return make_scalar(L, SPK_ARG_U32); }
static int l_i32(lua_State *L) { return make_scalar(L, SPK_ARG_I32); }
static int l_u64(lua_State *L) { return make_scalar(L, SPK_ARG_U64); }
static int l_i64(lua_State *L) { return make_scalar(L, SPK_ARG_I64); }
static int l_f32(lua_State *L) { return make_scalar(L, SPK_ARG_F32); }
static int l_f64(lua_State *L) { return make_scalar(L, SPK_ARG_F64); }

static int scalar_tostring(lua_State *L)
{
    spk_arg *a = luaL_checkudata(L, 1, SCALAR_MT);
    switch (a->kind) {
    case SPK_ARG_U32: lua_pushfstring(L, "spk.u32(%I)", (lua_Integer)a->v.u32); break;
    case SPK_ARG_I32: lua_pushfstring(L, "spk.i32(%I)", (lua_Integer)a->v.i32); break;
    case SPK_ARG_U64: lua_pushfstring(L, "spk.u64(%I)", (lua_Integer)a->v.u64); break;
    case SPK_ARG_I64: lua_pushfstring(L, "spk.i64(%I)", (lua_Integer)a->v.i64); break;
    case SPK_ARG_F32: lua_pushfstring(L, "spk.f32(%f)", (lua_Number)a->v.f32); break;
    case SPK_ARG_F64: lua_pushfstring(L, "spk.f64(%f)", (lua_Number)a->v.f64); break;
    default: lua_pushstring(L, "spk.cuda.scalar"); break;
    }
    return 1;
}

static int scalar_index(lua_State *L)
{
    spk_arg *a = luaL_checkudata(L, 1, SCALAR_MT);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "kind") == 0)
        lua_pushstring(L, spk_arg_kind_name(a->kind));
    else if (strcmp(key, "size") == 0)
        lua_pushinteger(L, (lua_Integer)spk_arg_size(a->kind));
    else if (strcmp(key, "value") == 0) {
        switch (a->kind) {
        case SPK_ARG_U32: lua_pushinteger(L, a->v.u32); break;
        case SPK_ARG_I32: lua_pushinteger(L, a->v.i32); break;
        case SPK_ARG_U64: lua_pushinteger(L, (lua_Integer)a->v.u64); break;
        case SPK_ARG_I64: lua_pushinteger(L, a->v.i64); break;
        case SPK_ARG_F32: lua_pushnumber(L, a->v.f32); break;
        case SPK_ARG_F64: lua_pushnumber(L, a->v.f64); break;
        default: lua_pushnil(L);
        }
    } else
        lua_pushnil(L);
    return 1;
}

/* Converts the array at idx into args (and the device storages they use).
 * Returns the count; errors name the argument. */
static int read_args(lua_State *L, int idx, const char *kernel, spk_arg *args, spk_storage **uses)
{
    if (lua_isnil(L, idx))
        return 0;
    if (!lua_istable(L, idx))
        return luaL_error(L, "kernel %s: args must be a table", kernel);
    int n = spk_lua_rawcount(L, idx);
    if (n > SPK_MAX_KERNEL_ARGS)
        return luaL_error(L, "kernel %s: %d arguments is more than the %d supported", kernel, n, SPK_MAX_KERNEL_ARGS);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, idx, i + 1);
        spk_arg *scalar = luaL_testudata(L, -1, SCALAR_MT);
        spk_tensor *t = scalar ? NULL : spk_lua_totensor(L, -1);
        uses[i] = NULL;
        if (scalar) {
            args[i] = *scalar;
        } else if (t) {
            if (!spk_tensor_is_device(t))
                return luaL_error(L, "kernel %s: argument %d is a host tensor; move it to the GPU with :cuda()",
                                  kernel, i + 1);
            args[i].kind = SPK_ARG_PTR;
            args[i].v.ptr = spk_tensor_data(t);
            uses[i] = t->storage;
        } else if (lua_type(L, -1) == LUA_TNUMBER) {
            return luaL_error(L, "kernel %s: argument %d is a plain number; give its type: spk.u32(n), spk.i32(n), "
                              "spk.u64(n), spk.f32(x) or spk.f64(x)", kernel, i + 1);
        } else {
            return luaL_error(L, "kernel %s: argument %d is a %s; expected a device tensor or a typed scalar",
                              kernel, i + 1, luaL_typename(L, -1));
        }
        lua_pop(L, 1);
    }
    return n;
}

/* spk.cuda.pack_args(param_sizes, args) -> {{kind=, size=}, ...}: the check a
 * launch makes, without a GPU (so it can be tested anywhere). */
static int l_pack_args(lua_State *L)
{
    spk_lua_noextra(L, 3);
    luaL_checktype(L, 1, LUA_TTABLE);
    int np = spk_lua_rawcount(L, 1);
    if (np > SPK_MAX_KERNEL_ARGS)
        return luaL_argerror(L, 1, "too many parameters");
    size_t sizes[SPK_MAX_KERNEL_ARGS];
    for (int i = 0; i < np; i++) {
        lua_rawgeti(L, 1, i + 1);
        sizes[i] = (size_t)luaL_checkinteger(L, -1);
        lua_pop(L, 1);
    }
    spk_arg args[SPK_MAX_KERNEL_ARGS];
    spk_storage *uses[SPK_MAX_KERNEL_ARGS];
    const char *name = luaL_optstring(L, 3, "?");
    int n = read_args(L, 2, name, args, uses);
    void *packed[SPK_MAX_KERNEL_ARGS];
    CHECK_OK(L, spk_pack_args(name, args, n, sizes, np, packed));
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_createtable(L, 0, 2);
        lua_pushstring(L, spk_arg_kind_name(args[i].kind));
        lua_setfield(L, -2, "kind");
        lua_pushinteger(L, (lua_Integer)spk_arg_size(args[i].kind));
        lua_setfield(L, -2, "size");
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* ---- kernels ----------------------------------------------------------- */

static int kernel_close(lua_State *L)
{
    lua_kernel *u = luaL_checkudata(L, 1, KERNEL_MT);
    spk_kernel_free(u->k);
    u->k = NULL;
    return 0;
}

/* A dim3 from a number or {x, y, z}. */
static void read_dim3(lua_State *L, int idx, const char *key, unsigned out[3], unsigned fallback)
{
    spk_lua_rawfield(L, idx, key);
    out[0] = out[1] = out[2] = 1;
    if (lua_isnil(L, -1)) {
        out[0] = fallback;
        if (!fallback)
            out[1] = out[2] = 0;
    } else if (lua_isinteger(L, -1)) {
        lua_Integer v = lua_tointeger(L, -1);
        if (v <= 0 || v > 0x7fffffff)
            luaL_error(L, "%s must be positive, got %I", key, (lua_Integer)v);
        out[0] = (unsigned)v;
    } else if (lua_istable(L, -1)) {
        int n = spk_lua_rawcount(L, -1);
        if (n < 1 || n > 3)
            luaL_error(L, "%s must have 1 to 3 entries", key);
        for (int i = 0; i < n; i++) {
            lua_rawgeti(L, -1, i + 1);
            if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) <= 0)
                luaL_error(L, "%s[%d] must be a positive integer", key, i + 1);
            out[i] = (unsigned)lua_tointeger(L, -1);
            lua_pop(L, 1);
        }
    } else {
        luaL_error(L, "%s must be an integer or {x, y, z}, got %s", key, luaL_typename(L, -1));
    }
    lua_pop(L, 1);
}

static size_t opt_size_field(lua_State *L, int idx, const char *key)
{
    spk_lua_rawfield(L, idx, key);
    lua_Integer v = lua_isnil(L, -1) ? 0 : luaL_checkinteger(L, -1);
    if (v < 0)
        luaL_error(L, "%s must not be negative", key);
    lua_pop(L, 1);
    return (size_t)v;
}

static int kernel_launch(lua_State *L)
{
    check_open(L, 1, KERNEL_MT, "kernel"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 2);
    spk_kernel *k = check_open(L, 1, KERNEL_MT, "kernel");
    luaL_checktype(L, 2, LUA_TTABLE);
    static const char *const known[] = {"grid", "block", "cluster", "smem", "stream", "cooperative", "args", NULL};
    spk_lua_checkkeys(L, 2, known, "launch"); /* the raw readers below make no allocation, so k stays valid */
    spk_launch_config cfg = {0};
    read_dim3(L, 2, "grid", cfg.grid, 0);
    read_dim3(L, 2, "block", cfg.block, 0);
    if (!cfg.grid[0] || !cfg.block[0])
        return luaL_error(L, "kernel %s: launch needs grid = and block =", spk_kernel_name(k));
    read_dim3(L, 2, "cluster", cfg.cluster, 0);
    cfg.smem = opt_size_field(L, 2, "smem");
    cfg.stream = field_stream(L, 2, "stream");
    spk_lua_rawfield(L, 2, "cooperative");
    cfg.cooperative = lua_toboolean(L, -1);
    lua_pop(L, 1);
    spk_arg args[SPK_MAX_KERNEL_ARGS];
    spk_storage *uses[SPK_MAX_KERNEL_ARGS], *compact[SPK_MAX_KERNEL_ARGS];
    spk_lua_rawfield(L, 2, "args");
    int n = read_args(L, lua_gettop(L), spk_kernel_name(k), args, uses);
    lua_pop(L, 1);
    int nuses = 0;
    for (int i = 0; i < n; i++)
        if (uses[i])
            compact[nuses++] = uses[i];
    cfg.uses = compact;
    cfg.nuses = nuses;
    CHECK_OK(L, spk_kernel_launch(k, &cfg, args, n));
    return 0;
}

static int kernel_attributes(lua_State *L)
{
    check_open(L, 1, KERNEL_MT, "kernel"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 1);
    spk_kernel_attrs a;
    CHECK_OK(L, spk_kernel_attributes(check_open(L, 1, KERNEL_MT, "kernel"), &a));
    lua_createtable(L, 0, 8);
#define SETI(key, v) (lua_pushinteger(L, (lua_Integer)(v)), lua_setfield(L, -2, key))
    SETI("registers", a.registers);
    SETI("local_bytes", a.local_bytes);
    SETI("static_smem", a.static_smem);
    SETI("const_bytes", a.const_bytes);
    SETI("max_threads", a.max_threads);
    SETI("max_dynamic_smem", a.max_dynamic_smem);
    SETI("ptx_version", a.ptx_version);
    SETI("binary_version", a.binary_version);
#undef SETI
    return 1;
}

static void read_block_smem(lua_State *L, int *block, size_t *smem)
{
    luaL_checktype(L, 2, LUA_TTABLE);
    static const char *const known[] = {"block", "smem", NULL};
    spk_lua_checkkeys(L, 2, known, "occupancy");
    unsigned dims[3];
    read_dim3(L, 2, "block", dims, 0);
    if (!dims[0])
        luaL_error(L, "block = is required");
    *block = (int)(dims[0] * dims[1] * dims[2]);
    *smem = opt_size_field(L, 2, "smem");
}

static int kernel_occupancy(lua_State *L)
{
    check_open(L, 1, KERNEL_MT, "kernel"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 2);
    spk_kernel *k = check_open(L, 1, KERNEL_MT, "kernel");
    int block, blocks;
    size_t smem;
    read_block_smem(L, &block, &smem);
    CHECK_OK(L, spk_kernel_occupancy(k, block, smem, &blocks));
    lua_pushinteger(L, blocks);
    return 1;
}

static int kernel_capacity(lua_State *L)
{
    check_open(L, 1, KERNEL_MT, "kernel"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 2);
    spk_kernel *k = check_open(L, 1, KERNEL_MT, "kernel");
    int block, blocks;
    size_t smem;
    read_block_smem(L, &block, &smem);
    CHECK_OK(L, spk_kernel_cooperative_capacity(k, block, smem, &blocks));
    lua_pushinteger(L, blocks);
    return 1;
}

static int kernel_params(lua_State *L)
{
    check_open(L, 1, KERNEL_MT, "kernel"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 1);
    spk_kernel *k = check_open(L, 1, KERNEL_MT, "kernel");
    int n;
    size_t sizes[SPK_MAX_KERNEL_ARGS];
    CHECK_OK(L, spk_kernel_params(k, &n, sizes, SPK_MAX_KERNEL_ARGS));
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)sizes[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int kernel_set_max_smem(lua_State *L)
{
    check_open(L, 1, KERNEL_MT, "kernel"); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 2);
    CHECK_OK(L, spk_kernel_set_max_dynamic_smem(check_open(L, 1, KERNEL_MT, "kernel"),
                                                (size_t)luaL_checkinteger(L, 2)));
    return 0;
}

static int kernel_index(lua_State *L)
{
    spk_kernel *k = check_open(L, 1, KERNEL_MT, "kernel");
    if (lua_type(L, 2) != LUA_TSTRING)
        return 0;
    const char *key = lua_tostring(L, 2);
    if (strcmp(key, "name") == 0) {
        lua_pushstring(L, spk_kernel_name(k));
        return 1;
    }
    luaL_getmetatable(L, KERNEL_MT);
    spk_lua_rawfield(L, -1, "methods");
    spk_lua_rawfield(L, -1, key);
    return 1;
}

static int kernel_tostring(lua_State *L)
{
    lua_kernel *u = luaL_checkudata(L, 1, KERNEL_MT);
    lua_pushfstring(L, "spk.cuda.kernel (%s)", u->k ? spk_kernel_name(u->k) : "closed");
    return 1;
}

/* ---- cuBLAS ------------------------------------------------------------ */

static spk_tensor *field_tensor(lua_State *L, int idx, const char *key)
{
    spk_lua_rawfield(L, idx, key);
    spk_tensor *t = spk_lua_totensor(L, -1);
    if (!t)
        luaL_error(L, "gemm: %s must be a tensor, got %s", key, luaL_typename(L, -1));
    lua_pop(L, 1); /* still referenced by the options table */
    return t;
}

static double opt_number_field(lua_State *L, int idx, const char *key, double fallback)
{
    spk_lua_rawfield(L, idx, key);
    double v = lua_isnil(L, -1) ? fallback : luaL_checknumber(L, -1);
    lua_pop(L, 1);
    return v;
}

/* The tensor in field `key`, or NULL where it is nil. */
static spk_tensor *opt_field_tensor(lua_State *L, int idx, const char *key)
{
    spk_lua_rawfield(L, idx, key);
    spk_tensor *t = NULL;
    if (!lua_isnil(L, -1) && !(t = spk_lua_totensor(L, -1)))
        luaL_error(L, "gemm: %s must be a tensor, got %s", key, luaL_typename(L, -1));
    lua_pop(L, 1); /* still referenced by the options table */
    return t;
}

static const char *const gemm_options[] = {"a", "b", "b_lo", "c", "transa", "transb", "alpha", "beta", "math",
                                           "stream", NULL};

static int l_gemm(lua_State *L)
{
    spk_lua_noextra(L, 1);
    luaL_checktype(L, 1, LUA_TTABLE);
    spk_lua_checkkeys(L, 1, gemm_options, "gemm");
    spk_gemm_args g = {0};
    g.a = field_tensor(L, 1, "a"); /* the raw readers make no allocation: the pointers stay valid */
    g.b = field_tensor(L, 1, "b");
    g.b_lo = opt_field_tensor(L, 1, "b_lo");
    g.c = field_tensor(L, 1, "c");
    spk_lua_rawfield(L, 1, "transa");
    g.transa = lua_toboolean(L, -1);
    spk_lua_rawfield(L, 1, "transb");
    g.transb = lua_toboolean(L, -1);
    lua_pop(L, 2);
    g.alpha = (float)opt_number_field(L, 1, "alpha", 1.0);
    g.beta = (float)opt_number_field(L, 1, "beta", 0.0);
    const char *math = opt_string_field(L, 1, "math", "gemm");
    g.math = SPK_MATH_FP32;
    if (math && spk_math_mode_from_name(math, &g.math))
        return spk_lua_fail(L);
    lua_pop(L, 1);
    g.stream = field_stream(L, 1, "stream");
    CHECK_OK(L, spk_gemm(&g));
    return 0;
}

/* spk.blas.gemm_check{...} -> m, n, k, count: the shape checks alone (no GPU). */
static int l_gemm_check(lua_State *L)
{
    spk_lua_noextra(L, 1);
    luaL_checktype(L, 1, LUA_TTABLE);
    spk_lua_checkkeys(L, 1, gemm_options, "gemm");
    spk_gemm_args g = {0};
    g.a = field_tensor(L, 1, "a"); /* the raw readers make no allocation: the pointers stay valid */
    g.b = field_tensor(L, 1, "b");
    g.b_lo = opt_field_tensor(L, 1, "b_lo");
    g.c = field_tensor(L, 1, "c");
    spk_lua_rawfield(L, 1, "transa");
    g.transa = lua_toboolean(L, -1);
    spk_lua_rawfield(L, 1, "transb");
    g.transb = lua_toboolean(L, -1);
    lua_pop(L, 2);
    int64_t m, n, k, count;
    CHECK_OK(L, spk_gemm_check(&g, &m, &n, &k, &count));
    lua_pushinteger(L, m);
    lua_pushinteger(L, n);
    lua_pushinteger(L, k);
    lua_pushinteger(L, count);
    return 4;
}

/* spk.blas.split_tf32(x[, stream]) -> hi, lo: x = hi + lo in TF32 parts. */
static int l_split_tf32(lua_State *L)
{
    spk_lua_noextra(L, 2);
    spk_lua_checktensor(L, 1); /* arguments in order; the pointer taken after the stream's check */
    spk_stream *s = opt_stream(L, 2);
    spk_tensor *x = spk_lua_checktensor(L, 1);
    spk_tensor *hi, *lo;
    CHECK_OK(L, spk_tf32_split(x, &hi, &lo, s));
    spk_lua_pushtensor(L, hi);
    spk_lua_pushtensor(L, lo);
    return 2;
}

/* ---- registration ------------------------------------------------------ */

/* A userdata type: its methods (and :close()) documented, recorded in the doc
 * registry as `doc`'s type. */
static void new_type(lua_State *L, const char *mt, const spk_lua_reg *methods, lua_CFunction close,
                     lua_CFunction tostring, lua_CFunction index, const char *doc)
{
    luaL_newmetatable(L, mt);
    lua_newtable(L);
    spk_lua_setfuncs(L, methods, 0);
    if (close) {
        spk_lua_push_close_method(L, close);
        spk_lua_setdoc(L, -1, "x:close()\nReleases it now (also at <close> and collection); later use is an error.");
        lua_setfield(L, -2, "close");
    }
    spk_lua_settype(L, mt, -1, doc);
    if (index) {
        lua_setfield(L, -2, "methods");
        lua_pushcfunction(L, index);
    }
    lua_setfield(L, -2, "__index");
    if (close) {
        lua_pushcfunction(L, close);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, close);
        lua_setfield(L, -2, "__close");
    }
    if (tostring) {
        lua_pushcfunction(L, tostring);
        lua_setfield(L, -2, "__tostring");
    }
    lua_pop(L, 1);
}

/* When the last Lua state using spk closes (its finalizers have run by then:
 * this one was registered first), the process-wide GPU state goes too, so a
 * leak checker run over `spk run` reports only real leaks. */
static int open_states;
#define STATE_SENTINEL "spk.cuda.state"

static int state_closed(lua_State *L)
{
    (void)L;
    if (__atomic_sub_fetch(&open_states, 1, __ATOMIC_ACQ_REL) == 0)
        spk_cuda_release_process_state();
    return 0;
}

static void register_state(lua_State *L)
{
    if (spk_lua_rawfield(L, LUA_REGISTRYINDEX, STATE_SENTINEL) != LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    lua_pop(L, 1);
    lua_newuserdatauv(L, 0, 0);
    lua_newtable(L);
    lua_pushcfunction(L, state_closed);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, STATE_SENTINEL);
    __atomic_add_fetch(&open_states, 1, __ATOMIC_ACQ_REL);
}

void spk_open_cuda(lua_State *L, int module)
{
    register_state(L);
    static const spk_lua_reg stream_methods[] = {
        {"synchronize", stream_synchronize, "s:synchronize()\nWaits until the work enqueued on s is done."},
        {"query", stream_query, "s:query() -> boolean\nWhether the work enqueued on s is done (no waiting)."},
        {"wait", stream_wait, "s:wait(event)\nLater work on s waits for the event (a cross-stream dependency, no host wait)."},
        {NULL, NULL, NULL}};
    static const spk_lua_reg event_methods[] = {
        {"record", event_record, "e:record([stream]) -> e\nRecords e on stream (default: the default stream)."},
        {"synchronize", event_synchronize, "e:synchronize()\nWaits until the work before e's record is done."},
        {"query", event_query, "e:query() -> boolean\nWhether e has completed (no waiting)."},
        {"elapsed", event_elapsed, "start:elapsed(stop) -> ms\nMilliseconds of GPU time from start's record to stop's."},
        {NULL, NULL, NULL}};
    static const spk_lua_reg graph_methods[] = {
        {"replay", graph_replay, "g:replay([stream])\nLaunches the captured work again on stream (default: the default stream)."},
        {"nodes", graph_nodes, "g:nodes() -> integer\nThe number of nodes (kernels, copies, ...) in the graph."},
        {NULL, NULL, NULL}};
    static const spk_lua_reg module_methods[] = {
        {"kernel", module_kernel, "m:kernel(name) -> kernel\nThe __global__ function `name` of the compiled module."},
        {"code", module_code, "m:code() -> text, bytes\nThe module's PTX text or cubin bytes, and its size."},
        {"params", module_params,
         "m:params(name) -> {{type =, size =, elements =, name =}, ...}\n"
         "The parameters of kernel `name` of a PTX module (arch = \"compute_XY\"), read from the PTX: no device\n"
         "needed. type is the PTX type (\"u64\": a pointer or 64-bit integer, \"u32\", \"f32\", \"b8\" arrays: structs)."},
        {NULL, NULL, NULL}};
    static const spk_lua_reg kernel_methods[] = {
        {"launch", kernel_launch,
         "k:launch{grid =, block =, args = {...}, smem = 0, stream =, cooperative = false, cluster =}\n"
         "Enqueues the kernel. grid, block and cluster are a number or {x, y, z}; args are device tensors and\n"
         "typed scalars (spk.u32(n), spk.f32(x), ...), checked in count and size against the kernel's\n"
         "parameters before launch."},
        {"attributes", kernel_attributes,
         "k:attributes() -> {registers, local_bytes, static_smem, const_bytes, max_threads, max_dynamic_smem,\n"
         "                   ptx_version, binary_version}"},
        {"occupancy", kernel_occupancy,
         "k:occupancy{block =, smem = 0} -> integer\nResident blocks per SM at that block size and dynamic shared memory."},
        {"cooperative_capacity", kernel_capacity,
         "k:cooperative_capacity{block =, smem = 0} -> integer\nThe most blocks a cooperative launch may have on this device."},
        {"params", kernel_params, "k:params() -> {bytes, ...}\nThe size of each kernel parameter, in order."},
        {"set_max_dynamic_smem", kernel_set_max_smem,
         "k:set_max_dynamic_smem(bytes)\nAllows launches with up to `bytes` of dynamic shared memory."},
        {NULL, NULL, NULL}};
    static const spk_lua_reg no_methods[] = {{NULL, NULL, NULL}};
    new_type(L, STREAM_MT, stream_methods, stream_close, stream_tostring, NULL,
             "stream: a CUDA stream (spk.cuda.stream()); work enqueued on it runs in order.");
    new_type(L, EVENT_MT, event_methods, event_close, event_tostring, NULL,
             "event: a CUDA event (spk.cuda.event()), for ordering streams and timing GPU work.");
    new_type(L, GRAPH_MT, graph_methods, graph_close, NULL, NULL,
             "graph: captured GPU work (spk.cuda.graph(fn)), replayed with one launch.");
    new_type(L, MODULE_MT, module_methods, module_close, module_tostring, module_index,
             "module: NVRTC-compiled code (spk.cuda.compile{...}); fields arch, format (\"cubin\" | \"ptx\"),\n"
             "size, key (the cache key), log (the compiler's), cached (loaded from the kernel cache), ptx.");
    new_type(L, KERNEL_MT, kernel_methods, kernel_close, kernel_tostring, kernel_index,
             "kernel: a __global__ function of a module (m:kernel(name)); field name.");
    new_type(L, SCALAR_MT, no_methods, NULL, scalar_tostring, scalar_index,
             "scalar: a typed kernel argument (spk.u32(n), spk.f32(x), ...); fields kind, size, value.");

    static const spk_lua_reg cuda_functions[] = {
        {"available", l_available, "spk.cuda.available() -> boolean\nWhether a usable CUDA device is present."},
        {"require", l_require,
         "spk.cuda.require()\nAn error (\"spk.cuda: no CUDA device (...)\") unless a device is usable."},
        {"info", l_info,
         "spk.cuda.info() -> {available, runtime_version, driver_version, nvrtc_version, devices, error}\n"
         "What the runtime reports; without a device, error says why (never raises)."},
        {"device", l_device,
         "spk.cuda.device([ordinal = current]) -> {index, name, cc, sms, memory_bytes, ...}\n"
         "One device's properties (ordinals 0-based, as CUDA counts)."},
        {"devices", l_devices, "spk.cuda.devices() -> {device, ...}\nEvery device's properties (see spk.cuda.device)."},
        {"set_device", l_set_device, "spk.cuda.set_device(ordinal)\nMakes device `ordinal` (0-based) current."},
        {"current_device", l_current_device, "spk.cuda.current_device() -> ordinal\nThe current device (0-based)."},
        {"synchronize", l_synchronize, "spk.cuda.synchronize()\nWaits until all work on the current device is done."},
        {"stream", l_stream, "spk.cuda.stream() -> stream\nA new non-blocking stream on the current device."},
        {"default_stream", l_default_stream,
         "spk.cuda.default_stream() -> stream\nspk's default stream of the current device (the one calls use without a stream)."},
        {"event", l_event, "spk.cuda.event() -> event\nA new event with timing, for e:record and start:elapsed(stop)."},
        {"capture_begin", l_capture_begin,
         "spk.cuda.capture_begin([stream])\nStarts capturing what is enqueued on stream into a graph (spk.cuda.graph does this)."},
        {"capture_end", l_capture_end, "spk.cuda.capture_end([stream]) -> graph\nEnds the capture and instantiates the graph."},
        {"capture_abort", l_capture_abort, "spk.cuda.capture_abort([stream])\nEnds a capture, discarding it."},
        {"zeros", l_zeros,
         "spk.cuda.zeros(shape[, dtype = \"f32\"[, stream]]) -> tensor\n"
         "A zero-filled tensor on the current device (freed in stream order)."},
        {"compile", l_compile,
         "spk.cuda.compile{source = text | file = path, defines = {NAME = value}, options = {...}, arch =,\n"
         "                 cache = true} -> module\n"
         "Compiles CUDA C++ with NVRTC (arch: the current device's, e.g. \"sm_90\"); #include finds the\n"
         "kernels folder. Results are cached on disk by SHA-256 of source, includes, defines, options, arch\n"
         "and NVRTC version. A compile error is raised with the compiler's log."},
        {"cache_info", l_cache_info,
         "spk.cuda.cache_info() -> {dir, writable, entries, bytes, hits, misses, rejected}\n"
         "The kernel cache's folder, its entries and this session's counters."},
        {"cache_clear", l_cache_clear, "spk.cuda.cache_clear()\nDeletes the kernel cache's entries."},
        {"set_cache_dir", l_set_cache_dir,
         "spk.cuda.set_cache_dir(dir | nil)\n"
         "The kernel cache's folder for this session (nil: $SPK_CACHE_DIR or the per-user default); resets counters."},
        {"set_kernel_dir", l_set_kernel_dir,
         "spk.cuda.set_kernel_dir(dir) -> boolean\nThe folder #include searches for kernel headers; false if dir is no folder."},
        {"kernel_dir", l_kernel_dir, "spk.cuda.kernel_dir() -> path\nThe kernel folder in use."},
        {"kernel_files", l_kernel_files,
         "spk.cuda.kernel_files([dir = kernel_dir()]) -> {name, ...}\nThe sorted *.cu and *.cuh files of a folder."},
        {"sha256", l_sha256, "spk.cuda.sha256(text) -> hex\nSHA-256 of text as 64 hex digits (the kernel cache's hash)."},
        {"pack_args", l_pack_args,
         "spk.cuda.pack_args(param_sizes, args[, name]) -> {{kind =, size =}, ...}\n"
         "The argument check a launch makes, without a GPU."},
        {"u32", l_u32, "spk.u32(n) -> scalar\nA 32-bit unsigned kernel argument."},
        {"i32", l_i32, "spk.i32(n) -> scalar\nA 32-bit signed kernel argument."},
        {"u64", l_u64, "spk.u64(n) -> scalar\nA 64-bit unsigned kernel argument."},
        {"i64", l_i64, "spk.i64(n) -> scalar\nA 64-bit signed kernel argument."},
        {"f32", l_f32, "spk.f32(x) -> scalar\nA float kernel argument."},
        {"f64", l_f64, "spk.f64(x) -> scalar\nA double kernel argument."},
        {NULL, NULL, NULL},
    };
    lua_newtable(L);
    spk_lua_setfuncs(L, cuda_functions, 0);
    lua_setfield(L, module, "cuda");

    static const spk_lua_reg blas_functions[] = {
        {"gemm", l_gemm,
         "spk.blas.gemm{a =, b =, c =, transa = false, transb = false, alpha = 1, beta = 0,\n"
         "              math = \"fp32\" | \"tf32\" | \"pedantic\" | \"3xtf32\", b_lo =, stream =}\n"
         "c = alpha * op(a) * op(b) + beta * c with cuBLAS on device f32 tensors (FP32 strict by default;\n"
         "\"3xtf32\": spk's split-TF32 kernels). A 3-d c [count, m, n] is a batch of count products in one\n"
         "launch; a and b are each count matrices or one shared by all. b_lo (math \"3xtf32\"): b and b_lo\n"
         "are b's parts from spk.blas.split_tf32, run on the TMA kernel (compute capability 9.0)."},
        {"split_tf32", l_split_tf32,
         "spk.blas.split_tf32(x[, stream]) -> hi, lo\n"
         "x = hi + lo with both parts TF32 (hi x rounded, lo the rest rounded), new f32 tensors of x's shape\n"
         "on x's side (x contiguous, host or device): the b and b_lo of spk.blas.gemm's split form."},
        {"gemm_check", l_gemm_check,
         "spk.blas.gemm_check{a =, b =, c =, transa =, transb =} -> m, n, k, count\n"
         "The shape checks of spk.blas.gemm alone (no GPU needed)."},
        {NULL, NULL, NULL}};
    lua_newtable(L);
    spk_lua_setfuncs(L, blas_functions, 0);
    lua_setfield(L, module, "blas");

    static const spk_lua_reg tensor_methods[] = {
        {"cuda", tensor_cuda, "t:cuda([stream]) -> tensor\nA copy on the current CUDA device (t itself if already there)."},
        {"cpu", tensor_cpu, "t:cpu([stream]) -> tensor\nA host copy of a device tensor (t itself if on the host)."},
        {"to_device", tensor_to_device,
         "t:to_device(\"cuda\" | \"cuda:N\" | \"cpu\"[, stream]) -> tensor\nWhat t:to(device) calls."},
        {NULL, NULL, NULL}};
    spk_lua_push_tensor_methods(L);
    spk_lua_setfuncs(L, tensor_methods, 0);
    lua_pop(L, 1);
}
