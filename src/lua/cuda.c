/* Lua bindings of the GPU runtime (src/cuda/runtime.h): spk.core.cuda's
 * devices, the userdata types stream, event and graph, and the tensor
 * methods :cuda(), :cpu() and :to("cuda"|"cpu"). kernels.c adds compile,
 * modules, kernels, typed scalars and the kernel cache to spk.core.cuda,
 * blas.c spk.core.blas. lua/spk/cuda.lua builds the friendly API (spk.cuda,
 * spk.blas, spk.u32 ...) on top. Device ordinals are 0-based, as in
 * t.device == "cuda:0". */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/runtime.h"
#include "lua/areas.h"
#include "lua/cuda_area.h"

/* ---- availability and devices ------------------------------------------ */

static int l_available(lua_State *L)
{
    lua_pushboolean(L, spk_cuda_available());
    return 1;
}

static int l_require(lua_State *L) { return spk_lua_check(L, spk_cuda_require()); }

static void push_props(lua_State *L, const spk_device_props *p)
{
    lua_createtable(L, 0, 24);
#define SETI(key, v) (lua_pushinteger(L, (lua_Integer)(v)), lua_setfield(L, -2, key))
    SETI("index", p->ordinal);
    spk_lua_setstring(L, "name", p->name);
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
    spk_lua_setbool(L, "cooperative", p->cooperative_launch);
    spk_lua_setbool(L, "cluster", p->cluster_launch);
}

static int l_device(lua_State *L)
{
    int ordinal;
    if (lua_isnoneornil(L, 1))
        spk_lua_check(L, spk_device_current(&ordinal));
    else
        ordinal = (int)luaL_checkinteger(L, 1);
    spk_device_props p;
    spk_lua_check(L, spk_device_props_get(ordinal, &p));
    push_props(L, &p);
    return 1;
}

static int l_devices(lua_State *L)
{
    int n;
    spk_lua_check(L, spk_device_count(&n));
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        spk_device_props p;
        spk_lua_check(L, spk_device_props_get(i, &p));
        push_props(L, &p);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int l_set_device(lua_State *L) { return spk_lua_check(L, spk_device_set((int)luaL_checkinteger(L, 1))); }

static int l_current_device(lua_State *L)
{
    int d;
    spk_lua_check(L, spk_device_current(&d));
    lua_pushinteger(L, d);
    return 1;
}

static int l_synchronize(lua_State *L) { return spk_lua_check(L, spk_device_synchronize()); }

void spk_lua_push_cuda_versions(lua_State *L, spk_cuda_info *info, int fields)
{
    spk_cuda_get_info(info);
    lua_createtable(L, 0, fields);
    spk_lua_setint(L, "runtime_version", info->runtime_version);
    spk_lua_setint(L, "driver_version", info->driver_version);
    lua_pushfstring(L, "%d.%d", info->nvrtc_major, info->nvrtc_minor);
    lua_setfield(L, -2, "nvrtc_version");
}

static int l_info(lua_State *L)
{
    spk_cuda_info info;
    spk_lua_push_cuda_versions(L, &info, 8);
    spk_lua_setbool(L, "available", info.device_count > 0);
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
        spk_lua_setstring(L, "error", info.error);
    }
    return 1;
}

/* ---- streams ----------------------------------------------------------- */

spk_stream *spk_lua_optstream(lua_State *L, int idx)
{
    return lua_isnoneornil(L, idx) ? NULL : spk_lua_checkobject(L, idx, &spk_lua_stream_type);
}

spk_stream *spk_lua_fieldstream(lua_State *L, int t, const char *key, const char *where)
{
    spk_lua_rawfield(L, t, key);
    spk_stream *s = NULL;
    if (!lua_isnil(L, -1) && !(s = spk_lua_toobject(L, -1, &spk_lua_stream_type)))
        luaL_error(L, "%s%s%s must be an open spk.cuda stream, got %s", where ? where : "", where ? ": " : "", key,
                   spk_lua_typename(L, -1));
    lua_pop(L, 1); /* the table keeps it alive */
    return s;
}

static void push_stream(lua_State *L, spk_stream *s)
{
    if (!s)
        spk_lua_fail(L);
    *spk_lua_newobject(L, &spk_lua_stream_type) = s;
}

static int l_stream(lua_State *L)
{
    push_stream(L, spk_stream_new());
    return 1;
}

static int l_default_stream(lua_State *L)
{
    push_stream(L, spk_stream_default()); /* release is a no-op on the default stream */
    return 1;
}

static spk_stream *self_stream(lua_State *L) { return spk_lua_checkobject(L, 1, &spk_lua_stream_type); }

static int stream_synchronize(lua_State *L) { return spk_lua_check(L, spk_stream_synchronize(self_stream(L))); }

/* A query's answer, once its status is checked. */
static int push_done(lua_State *L, int status, const bool *done)
{
    spk_lua_check(L, status);
    lua_pushboolean(L, *done);
    return 1;
}

static int stream_query(lua_State *L)
{
    bool done = false;
    return push_done(L, spk_stream_query(self_stream(L), &done), &done);
}

static spk_lua_type event_type; /* below */

static int stream_wait(lua_State *L)
{
    spk_stream *s = self_stream(L);
    return spk_lua_check(L, spk_stream_wait_event(s, spk_lua_checkobject(L, 2, &event_type)));
}

static void stream_tostring(lua_State *L, void *s)
{
    lua_pushfstring(L, "spk.cuda.stream (cuda:%d, %p)", spk_stream_device(s), spk_stream_handle(s));
}

static const spk_lua_checked_reg stream_methods[] = {
    {"synchronize", stream_synchronize, "s:synchronize()\nWaits until the work enqueued on s is done.", ""},
    {"query", stream_query, "s:query() -> boolean\nWhether the work enqueued on s is done (no waiting).", ""},
    {"wait", stream_wait,
     "s:wait(event)\nLater work on s waits for the event (a cross-stream dependency, no host wait).", "event"},
    {NULL, NULL, NULL, NULL}};

static void stream_free(void *s) { spk_stream_release(s); }

spk_lua_type spk_lua_stream_type = {.metatable = "spk.cuda.stream", .name = "stream",
    .methods = stream_methods, .free = stream_free, .tostring = stream_tostring,
    .closed = "spk.cuda.stream (closed)",
    .doc = "stream: a CUDA stream (spk.cuda.stream()); work enqueued on it runs in order.",
};

/* ---- events ------------------------------------------------------------ */

static int l_event(lua_State *L)
{
    bool timing = lua_isnoneornil(L, 1) ? true : lua_toboolean(L, 1);
    void **slot = spk_lua_newobject(L, &event_type);
    if (!(*slot = spk_event_new(timing)))
        return spk_lua_fail(L);
    return 1;
}

static spk_event *self_event(lua_State *L) { return spk_lua_checkobject(L, 1, &event_type); }

static int event_record(lua_State *L)
{
    spk_event *e = self_event(L);
    spk_lua_check(L, spk_event_record(e, spk_lua_optstream(L, 2)));
    lua_settop(L, 1);
    return 1;
}

static int event_synchronize(lua_State *L) { return spk_lua_check(L, spk_event_synchronize(self_event(L))); }

static int event_query(lua_State *L)
{
    bool done = false;
    return push_done(L, spk_event_query(self_event(L), &done), &done);
}

static void event_tostring(lua_State *L, void *e) { lua_pushfstring(L, "spk.cuda.event (%p)", e); }

/* start:elapsed(stop) -> milliseconds from start to stop. */
static int event_elapsed(lua_State *L)
{
    float ms;
    spk_event *start = self_event(L); /* in order: self's error first */
    spk_event *stop = spk_lua_checkobject(L, 2, &event_type);
    spk_lua_check(L, spk_event_elapsed_ms(start, stop, &ms));
    lua_pushnumber(L, ms);
    return 1;
}

static const spk_lua_checked_reg event_methods[] = {
    {"record", event_record, "e:record([stream]) -> e\nRecords e on stream (default: the default stream).", "stream"},
    {"synchronize", event_synchronize, "e:synchronize()\nWaits until the work before e's record is done.", ""},
    {"query", event_query, "e:query() -> boolean\nWhether e has completed (no waiting).", ""},
    {"elapsed", event_elapsed, "start:elapsed(stop) -> ms\nMilliseconds of GPU time from start's record to stop's.",
     "stop"},
    {NULL, NULL, NULL, NULL}};

static void event_free(void *e) { spk_event_free(e); }

static spk_lua_type event_type = {.metatable = "spk.cuda.event", .name = "event",
    .methods = event_methods, .free = event_free, .tostring = event_tostring,
    .closed = "spk.cuda.event (closed)",
    .doc = "event: a CUDA event (spk.cuda.event()), for ordering streams and timing GPU work.",
};

/* ---- graphs ------------------------------------------------------------ */

static spk_lua_type graph_type; /* below */

static int l_capture_begin(lua_State *L) { return spk_lua_check(L, spk_graph_capture_begin(spk_lua_optstream(L, 1))); }

static int l_capture_abort(lua_State *L)
{
    spk_graph_capture_abort(spk_lua_optstream(L, 1));
    return 0;
}

static int l_capture_end(lua_State *L)
{
    spk_graph *g = spk_graph_capture_end(spk_lua_optstream(L, 1));
    if (!g)
        return spk_lua_fail(L);
    *spk_lua_newobject(L, &graph_type) = g;
    return 1;
}

static int graph_replay(lua_State *L)
{
    spk_graph *g = spk_lua_checkobject(L, 1, &graph_type);
    return spk_lua_check(L, spk_graph_replay(g, spk_lua_optstream(L, 2)));
}

static int graph_nodes(lua_State *L)
{
    size_t n;
    spk_lua_check(L, spk_graph_node_count(spk_lua_checkobject(L, 1, &graph_type), &n));
    lua_pushinteger(L, (lua_Integer)n);
    return 1;
}

static const spk_lua_checked_reg graph_methods[] = {
    {"replay", graph_replay, "g:replay([stream])\nLaunches the captured work again on stream (default: the default stream).",
     "stream"},
    {"nodes", graph_nodes, "g:nodes() -> integer\nThe number of nodes (kernels, copies, ...) in the graph.", ""},
    {NULL, NULL, NULL, NULL}};

static void graph_free(void *g) { spk_graph_free(g); }

static spk_lua_type graph_type = {.metatable = "spk.cuda.graph", .name = "graph",
    .methods = graph_methods, .free = graph_free,
    .doc = "graph: captured GPU work (spk.cuda.graph(fn)), replayed with one launch.",
};

/* ---- tensors ----------------------------------------------------------- */

/* t:cuda([stream]) */
static int tensor_cuda(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    spk_stream *s = spk_lua_optstream(L, 2);
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
    spk_tensor *t = spk_lua_checktensor(L, 1);
    spk_stream *s = spk_lua_optstream(L, 2);
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
        spk_lua_check(L, spk_device_current(&current));
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
    int64_t shape[SPK_MAX_DIMS];
    int ndim = spk_lua_checkintegers(L, 1, shape, 0, SPK_MAX_DIMS, "shape");
    spk_dtype dtype = SPK_F32;
    if (!lua_isnoneornil(L, 2) && spk_dtype_from_name(luaL_checkstring(L, 2), &dtype))
        return spk_lua_fail(L);
    spk_lua_pushtensor(L, spk_device_tensor_new(dtype, ndim, shape, spk_lua_optstream(L, 3)));
    return 1;
}

/* ---- registration ------------------------------------------------------ */

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

static const spk_lua_checked_reg cuda_functions[] = {
    {"available", l_available, "spk.cuda.available() -> boolean\nWhether a usable CUDA device is present.", ""},
    {"require", l_require, "spk.cuda.require()\nAn error (\"spk.cuda: no CUDA device (...)\") unless a device is usable.",
     ""},
    {"info", l_info,
     "spk.cuda.info() -> {available, runtime_version, driver_version, nvrtc_version, devices, error}\n"
     "What the runtime reports; without a device, error says why (never raises).",
     ""},
    {"device", l_device,
     "spk.cuda.device([ordinal = current]) -> {index, name, cc, sms, memory_bytes, ...}\n"
     "One device's properties (ordinals 0-based, as CUDA counts).",
     "ordinal"},
    {"devices", l_devices, "spk.cuda.devices() -> {device, ...}\nEvery device's properties (see spk.cuda.device).", ""},
    {"set_device", l_set_device, "spk.cuda.set_device(ordinal)\nMakes device `ordinal` (0-based) current.", "ordinal"},
    {"current_device", l_current_device, "spk.cuda.current_device() -> ordinal\nThe current device (0-based).", ""},
    {"synchronize", l_synchronize, "spk.cuda.synchronize()\nWaits until all work on the current device is done.", ""},
    {"stream", l_stream, "spk.cuda.stream() -> stream\nA new non-blocking stream on the current device.", ""},
    {"default_stream", l_default_stream,
     "spk.cuda.default_stream() -> stream\nspk's default stream of the current device (the one calls use without a stream).",
     ""},
    {"event", l_event, "spk.cuda.event() -> event\nA new event with timing, for e:record and start:elapsed(stop).", "timing"},
    {"capture_begin", l_capture_begin,
     "spk.cuda.capture_begin([stream])\nStarts capturing what is enqueued on stream into a graph (spk.cuda.graph does this).",
     "stream"},
    {"capture_end", l_capture_end, "spk.cuda.capture_end([stream]) -> graph\nEnds the capture and instantiates the graph.",
     "stream"},
    {"capture_abort", l_capture_abort, "spk.cuda.capture_abort([stream])\nEnds a capture, discarding it.", "stream"},
    {"zeros", l_zeros,
     "spk.cuda.zeros(shape[, dtype = \"f32\"[, stream]]) -> tensor\n"
     "A zero-filled tensor on the current device (freed in stream order).",
     "shape, dtype, stream"},
    {NULL, NULL, NULL, NULL},
};

static const spk_lua_checked_reg tensor_methods[] = {
    {"cuda", tensor_cuda, "t:cuda([stream]) -> tensor\nA copy on the current CUDA device (t itself if already there).",
     "stream"},
    {"cpu", tensor_cpu, "t:cpu([stream]) -> tensor\nA host copy of a device tensor (t itself if on the host).", "stream"},
    {"to_device", tensor_to_device,
     "t:to_device(\"cuda\" | \"cuda:N\" | \"cpu\"[, stream]) -> tensor\nWhat t:to(device) calls.", "device, stream"},
    {NULL, NULL, NULL, NULL}};

void spk_open_cuda(lua_State *L, int module)
{
    register_state(L);
    spk_lua_newtype(L, &spk_lua_stream_type);
    spk_lua_newtype(L, &event_type);
    spk_lua_newtype(L, &graph_type);
    lua_newtable(L);
    spk_lua_setfuncs_module(L, cuda_functions, "spk.cuda");
    lua_setfield(L, module, "cuda");
    spk_lua_push_tensor_methods(L);
    spk_lua_setfuncs_checked(L, tensor_methods, &spk_lua_tensor_self);
    lua_pop(L, 1);
}
