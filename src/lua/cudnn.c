/* Lua bindings of the cuDNN backend: core.cudnn.stack{...} (a plan userdata)
 * and core.cudnn.algorithms{...}. Thin: every argument is checked here or in
 * the C checks before any CUDA call; failures raise spk_last_error().
 * lua/spk/cudnn.lua builds spk.lstm's cuDNN entry points on top. */
#include <string.h>

#include "core/error.h"
#include "cuda/cudnn_rnn.h"
#include "lstm/cudnn_stack.h"
#include "lua/areas.h"
#include "lua/cuda_area.h"

#define MAX_LAYERS 64

static spk_lua_type plan_type; /* below */

/* Integer field `key` of the table at `arg`; `fallback` when absent, an error when required and absent. */
static int64_t int_field(lua_State *L, int arg, const char *key, bool required, int64_t fallback)
{
    int t = spk_lua_rawfield(L, arg, key);
    int64_t v = fallback;
    if (t == LUA_TNIL) {
        if (required)
            luaL_error(L, "cudnn stack: %s is required", key);
    } else {
        int ok = 0;
        v = (int64_t)lua_tointegerx(L, -1, &ok);
        if (!ok)
            luaL_error(L, "cudnn stack: %s must be an integer (got %s)", key, spk_lua_describe(L, -1));
    }
    lua_pop(L, 1);
    return v;
}

static const char *string_field(lua_State *L, int arg, const char *key, const char *fallback)
{
    int t = spk_lua_rawfield(L, arg, key);
    const char *s = fallback;
    if (t == LUA_TSTRING)
        s = lua_tostring(L, -1); /* stays valid: the options table holds it */
    else if (t != LUA_TNIL)
        luaL_error(L, "cudnn stack: %s must be a string (got %s)", key, luaL_typename(L, -1));
    lua_pop(L, 1);
    return s;
}

/* Reads batch, steps, algo, layout, math and stream from the options at `arg`. */
static void read_options(lua_State *L, int arg, spk_cudnn_stack_options *o)
{
    *o = spk_cudnn_stack_defaults();
    o->batch = int_field(L, arg, "batch", true, 0);
    o->steps = int_field(L, arg, "steps", false, 589);
    if (spk_cudnn_algo_from_name(string_field(L, arg, "algo", "standard"), &o->algo) ||
        spk_cudnn_layout_from_name(string_field(L, arg, "layout", "batch_major"), &o->layout) ||
        spk_cudnn_math_from_name(string_field(L, arg, "math", spk_cudnn_math_name(SPK_CUDNN_MATH_FP32)), &o->math))
        spk_lua_fail(L);
    o->stream = spk_lua_fieldstream(L, arg, "stream", "cudnn stack"); /* the caller's options table keeps it alive */
}

static const char *const stack_options[] = {"layers", "batch", "steps", "algo", "layout", "math", "stream", NULL};

/* stack{layers =, batch =, steps = 589, algo = "standard", layout = "batch_major", math = "fp32", stream =} */
static int l_stack(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    spk_lua_checkoptions(L, 1, stack_options);
    /* The plan's slot first: after it, nothing allocates before the layers
     * and the stream are used. */
    void **slot = spk_lua_newobject(L, &plan_type);
    int at = lua_gettop(L);
    spk_cudnn_stack_options o;
    read_options(L, 1, &o);
    spk_lstm_layer layers[MAX_LAYERS];
    spk_lua_rawfield(L, 1, "layers");
    int count = spk_lua_checklayers(L, -1, layers, MAX_LAYERS, "cudnn stack");
    if (!(*slot = spk_cudnn_stack_new(layers, count, &o)))
        return spk_lua_fail(L);
    lua_pushvalue(L, at);
    return 1;
}

static const char *const algorithms_options[] = {"layers", "batch", "steps", "layout", "math", "stream",
                                                 "hidden", "input", NULL};

/* algorithms{batch =, steps = 589, layers = stack | count (4), hidden = 128, input = 60, layout =, math =}
 * -> {{algo =, ok =, reason =}, ...}; a random stack of the given sizes when layers is a count or absent. */
static int l_algorithms(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    spk_lua_checkoptions(L, 1, algorithms_options);
    spk_cudnn_stack_options o;
    read_options(L, 1, &o);
    spk_lstm_layer layers[MAX_LAYERS];
    spk_lstm_weights random[MAX_LAYERS];
    int count = 0, owned = 0;
    int t = spk_lua_rawfield(L, 1, "layers");
    if (t == LUA_TTABLE) {
        if (spk_lua_rawfield(L, 1, "hidden") != LUA_TNIL || spk_lua_rawfield(L, 1, "input") != LUA_TNIL)
            return luaL_error(L, "cudnn algorithms: hidden and input are for a random stack; the layers given fix them");
        lua_pop(L, 2);
        count = spk_lua_checklayers(L, -1, layers, MAX_LAYERS, "cudnn algorithms");
    } else {
        int64_t n = t == LUA_TNIL ? 4 : int_field(L, 1, "layers", false, 4);
        int64_t hidden = int_field(L, 1, "hidden", false, 128), input = int_field(L, 1, "input", false, 60);
        if (n < 1 || n > MAX_LAYERS)
            return luaL_error(L, "cudnn algorithms: layers must be a stack or a count in 1..%d, got %d", MAX_LAYERS,
                              (int)n);
        if (hidden < 1 || input < 1)
            return luaL_error(L, "cudnn algorithms: hidden and input must be at least 1");
        if (spk_lstm_random((int)n, input, hidden, 1, 1.0, SPK_F32, random))
            return spk_lua_fail(L);
        count = owned = (int)n;
        for (int k = 0; k < count; k++)
            layers[k] = (spk_lstm_layer){random[k].W, random[k].R, random[k].B};
    }
    spk_cudnn_algo_result results[SPK_CUDNN_ALGO_COUNT];
    int rc = spk_cudnn_algorithms(layers, count, &o, results);
    for (int k = 0; k < owned; k++)
        spk_lstm_weights_free(&random[k]);
    if (rc)
        return spk_lua_fail(L);
    lua_createtable(L, SPK_CUDNN_ALGO_COUNT, 0);
    for (int a = 0; a < SPK_CUDNN_ALGO_COUNT; a++) {
        lua_createtable(L, 0, 3);
        spk_lua_setstring(L, "algo", spk_cudnn_algo_name(results[a].algo));
        spk_lua_setbool(L, "ok", results[a].ok);
        spk_lua_setstring(L, "reason", results[a].reason);
        lua_rawseti(L, -2, a + 1);
    }
    return 1;
}

/* ---- the plan userdata ------------------------------------------------------- */

/* plan:forward(x[, stream]) -> y on x's side */
static int plan_forward(lua_State *L)
{
    spk_cudnn_stack *p = spk_lua_checkobject(L, 1, &plan_type);
    const spk_tensor *x = spk_lua_checktensor(L, 2);
    spk_stream *s = spk_lua_optstream(L, 3);
    spk_lua_pushtensor(L, spk_cudnn_stack_forward(p, x, s));
    return 1;
}

/* plan:forward_into(x, y[, stream]) -> y: device tensors, only enqueued (capturable). */
static int plan_forward_into(lua_State *L)
{
    spk_cudnn_stack *p = spk_lua_checkobject(L, 1, &plan_type);
    const spk_tensor *x = spk_lua_checktensor(L, 2);
    spk_tensor *y = spk_lua_checktensor(L, 3);
    spk_stream *s = spk_lua_optstream(L, 4);
    if (spk_cudnn_stack_forward_into(p, x, y, s))
        return spk_lua_fail(L);
    lua_settop(L, 3);
    return 1;
}

/* plan:device_buffers([x[, stream]]) -> x, y: an input and an output on the
 * plan's device, for forward_into and timing. x: zeros when absent, a device
 * copy of a host x, or a device x itself. */
static int plan_device_buffers(lua_State *L)
{
    spk_cudnn_stack *p = spk_lua_checkobject(L, 1, &plan_type);
    const spk_tensor *given = lua_isnoneornil(L, 2) ? NULL : spk_lua_checktensor(L, 2);
    spk_stream *s = spk_lua_optstream(L, 3);
    spk_cudnn_stack_info info;
    spk_cudnn_stack_get_info(p, &info);
    if (given && spk_cudnn_stack_check_io(p, given, NULL))
        return spk_lua_fail(L);
    if (spk_device_set(info.device))
        return spk_lua_fail(L);
    const int64_t xs[3] = {info.batch, info.steps, info.dims.input};
    const int64_t ys[3] = {info.batch, info.steps, 2 * info.dims.hidden};
    /* Both made before either is pushed: a push may collect, and a finalizer
     * may close the stream or the given tensor. */
    spk_tensor *x = !given ? spk_device_tensor_new(SPK_F32, 3, xs, s)
                    : spk_tensor_is_host(given) ? spk_tensor_to_device(given, s) : NULL;
    if (given && !x && spk_tensor_is_host(given))
        return spk_lua_fail(L);
    spk_tensor *y = spk_device_tensor_new(SPK_F32, 3, ys, s);
    if (!y) {
        spk_tensor_free(x);
        return spk_lua_fail(L);
    }
    if (x)
        spk_lua_pushtensor(L, x);
    else
        lua_pushvalue(L, 2);
    spk_lua_pushtensor(L, y);
    return 2;
}

static int plan_is_closed(lua_State *L)
{
    lua_pushboolean(L, spk_lua_toobject(L, 1, &plan_type) == NULL);
    return 1;
}

/* Pushes field `key` of the plan's description; returns false for an unknown key. */
static bool push_field(lua_State *L, const spk_cudnn_stack_info *in, const char *key)
{
    if (!strcmp(key, "algo"))
        lua_pushstring(L, spk_cudnn_algo_name(in->algo));
    else if (!strcmp(key, "layout"))
        lua_pushstring(L, spk_cudnn_layout_name(in->layout));
    else if (!strcmp(key, "math"))
        lua_pushstring(L, spk_cudnn_math_name(in->math));
    else if (!strcmp(key, "backend"))
        lua_pushliteral(L, "cudnn");
    else if (!strcmp(key, "batch"))
        lua_pushinteger(L, in->batch);
    else if (!strcmp(key, "steps"))
        lua_pushinteger(L, in->steps);
    else if (!strcmp(key, "layers"))
        lua_pushinteger(L, in->dims.layers);
    else if (!strcmp(key, "hidden"))
        lua_pushinteger(L, in->dims.hidden);
    else if (!strcmp(key, "input"))
        lua_pushinteger(L, in->dims.input);
    else if (!strcmp(key, "device"))
        lua_pushinteger(L, in->device);
    else if (!strcmp(key, "weight_bytes"))
        lua_pushinteger(L, (lua_Integer)in->weight_bytes);
    else if (!strcmp(key, "workspace_bytes"))
        lua_pushinteger(L, (lua_Integer)in->workspace_bytes);
    else if (!strcmp(key, "reserve_bytes"))
        lua_pushinteger(L, (lua_Integer)in->reserve_bytes);
    else
        return false;
    return true;
}

/* __index: the methods (which lua/spk/cudnn.lua extends), then the fields. */
static int plan_index(lua_State *L)
{
    spk_lua_push_methods(L, plan_type.metatable);
    lua_pushvalue(L, 2);
    if (lua_rawget(L, -2) != LUA_TNIL)
        return 1;
    spk_cudnn_stack *p = spk_lua_toobject(L, 1, &plan_type);
    const char *key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
    if (!key || !p) {
        lua_pushnil(L);
        return 1;
    }
    spk_cudnn_stack_info info;
    spk_cudnn_stack_get_info(p, &info);
    if (!push_field(L, &info, key))
        lua_pushnil(L);
    return 1;
}

static void plan_tostring(lua_State *L, void *p)
{
    spk_cudnn_stack_info in;
    spk_cudnn_stack_get_info(p, &in);
    lua_pushfstring(L, "cudnn stack (%s, %s, %s; batch %I, steps %I, %d layers, input %I, hidden %I)",
                    spk_cudnn_algo_name(in.algo), spk_cudnn_layout_name(in.layout), spk_cudnn_math_name(in.math),
                    (lua_Integer)in.batch, (lua_Integer)in.steps, in.dims.layers, (lua_Integer)in.dims.input,
                    (lua_Integer)in.dims.hidden);
}

static int l_version(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)spk_cudnn_version());
    lua_pushinteger(L, (lua_Integer)spk_cudnn_header_version());
    return 2;
}

static const spk_lua_checked_reg plan_methods[] = {
    {"forward", plan_forward,
     "plan:forward(x[, stream]) -> y\n"
     "x f32 [batch, steps, in] on the host or the device; y [batch, steps, 2H] on x's side.",
     "x, stream"},
    {"forward_into", plan_forward_into,
     "plan:forward_into(x, y[, stream])\nDevice x and y; enqueued only, nothing waits (what a CUDA graph captures).",
     "x, y, stream"},
    {"device_buffers", plan_device_buffers,
     "plan:device_buffers([x[, stream]]) -> x_device, y_device\nDevice tensors shaped for forward_into (x copied if given).",
     "x, stream"},
    {NULL, NULL, NULL, NULL},
};

static void plan_free(void *p) { spk_cudnn_stack_free(p); }

static spk_lua_type plan_type = {.metatable = "spk.cudnn.stack", .name = "cudnn stack",
    .methods = plan_methods, .free = plan_free, .tostring = plan_tostring, .index = plan_index,
    .doc = "cudnn stack plan: cuDNN's LSTM over the stack (spk.lstm.cudnn_stack{...}); fields algo, layout,\n"
           "math, batch, steps, layers, hidden, input, device, weight_bytes, workspace_bytes, reserve_bytes.",
    .close_doc = "plan:close()\nFrees the plan's device memory now (also <close> and collection).",
};

static const spk_lua_checked_reg module_functions[] = {
    {"stack", l_stack,
     "spk.core.cudnn.stack{layers =, batch =, steps =, algo =, layout =, math =, stream =} -> plan\n"
     "What spk.lstm.cudnn_stack calls.",
     "options"},
    {"algorithms", l_algorithms,
     "spk.core.cudnn.algorithms{batch =, steps =, layers =, hidden =, input =, layout =, math =} -> results\n"
     "What spk.lstm.cudnn_algorithms calls.",
     "options"},
    {"version", l_version,
     "spk.cudnn.version() -> runtime, header\nThe cuDNN library's version and the one spk was built with (e.g. 91400).",
     ""},
    {NULL, NULL, NULL, NULL},
};

void spk_open_cudnn(lua_State *L, int module)
{
    lua_newtable(L); /* core.cudnn */
    spk_lua_setfuncs_module(L, module_functions, "spk.cudnn");
    spk_lua_newtype(L, &plan_type);
    static const spk_lua_checked_reg any_state[] = {
        {"is_closed", plan_is_closed, "plan:is_closed() -> boolean", ""},
        {NULL, NULL, NULL, NULL}};
    spk_lua_setmethods_any_state(L, &plan_type, any_state);
    spk_lua_push_methods(L, plan_type.metatable);
    lua_setfield(L, -2, "methods"); /* lua/spk/cudnn.lua adds :time() here */
    lua_setfield(L, module, "cudnn");
}
