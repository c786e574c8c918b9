/* Lua bindings of src/lstm: core.lstm.* (layers, packing, the reference),
 * core.schedule.* (tile schedules) and core.onnx.* (ONNX LSTM files). Thin:
 * check arguments, call C, raise spk_last_error(). lua/spk/lstm.lua builds
 * spk.lstm, spk.schedule and spk.onnx on top.
 * Layers are counted from 1 here as in every Lua-facing message; trace steps
 * are 1-based in Lua; schedule tile indices stay 0-based (as the kernel sees
 * them). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "lstm/device_layers.h"
#include "lstm/fields.h"
#include "lstm/kernel_stack.h"
#include "lstm/lstm.h"
#include "lstm/onnx_stack.h"
#include "lua/areas.h"

#define MAX_LAYERS 64

/* Field `key` of the table at `idx` as a tensor, NULL if absent; a non-tensor
 * value is an error naming the layer. */
static const spk_tensor *layer_field(lua_State *L, int idx, int layer, const char *key)
{
    spk_lua_rawfield(L, idx, key);
    const spk_tensor *t = NULL;
    if (!lua_isnil(L, -1)) {
        t = spk_lua_totensor(L, -1);
        if (!t)
            luaL_error(L, "layer %d: %s is not a tensor (got %s)", layer, key,
                       luaL_testudata(L, -1, SPK_TENSOR_MT) ? "a closed tensor" : luaL_typename(L, -1));
    }
    lua_pop(L, 1); /* the layers table keeps the tensor alive */
    return t;
}

static int l_validate(lua_State *L)
{
    spk_lstm_layer layers[MAX_LAYERS];
    int count = spk_lua_checklayers(L, 1, layers, MAX_LAYERS, NULL);
    spk_lstm_dims dims;
    if (spk_lstm_validate(layers, count, &dims))
        return spk_lua_fail(L);
    lua_createtable(L, 0, 3);
    spk_lua_setint(L, "layers", dims.layers);
    spk_lua_setint(L, "hidden", dims.hidden);
    spk_lua_setint(L, "input", dims.input);
    return 1;
}

/* f(t, from, to) -> tensor: the arguments checked in order, so the first bad
 * one is the one reported; the tensor is taken last (a number made a string
 * allocates). */
static int repack(lua_State *L, spk_tensor *(*f)(const spk_tensor *, const char *, const char *))
{
    spk_lua_checktensor(L, 1);
    const char *from = luaL_checkstring(L, 2), *to = luaL_checkstring(L, 3);
    spk_lua_pushtensor(L, f(spk_lua_checktensor(L, 1), from, to));
    return 1;
}

static int l_pack_directions(lua_State *L) { return repack(L, spk_lstm_pack_directions); }
static int l_unpack_directions(lua_State *L) { return repack(L, spk_lstm_unpack_directions); }
static int l_pack_bias(lua_State *L) { return repack(L, spk_lstm_pack_bias); }

/* reorder_gates(t, dim (1-based), from, to) */
static int l_reorder_gates(lua_State *L)
{
    spk_lua_checktensor(L, 1);
    lua_Integer dim = luaL_checkinteger(L, 2);
    const char *from = luaL_checkstring(L, 3), *to = luaL_checkstring(L, 4);
    const spk_tensor *t = spk_lua_checktensor(L, 1);
    spk_lua_pushtensor(L, spk_lstm_reorder_gates(t, (int)dim - 1, from, to));
    return 1;
}

static void push_layer(lua_State *L, spk_lstm_weights *w)
{
    lua_createtable(L, 0, 3);
    spk_tensor *parts[3] = {w->W, w->R, w->B};
    const char *names[3] = {"W", "R", "B"};
    w->W = w->R = w->B = NULL; /* Lua owns them from here */
    for (int i = 0; i < 3; i++) {
        spk_lua_pushtensor(L, parts[i]);
        lua_setfield(L, -2, names[i]);
    }
}

static const char *const torch_names[8] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh",
                                           "weight_ih_reverse", "weight_hh_reverse", "bias_ih_reverse",
                                           "bias_hh_reverse"};

/* from_torch({weight_ih =, weight_hh =, bias_ih =, bias_hh =, *_reverse =}, layer (1-based)) -> {W, R, B} */
static int l_from_torch(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    int layer = (int)luaL_checkinteger(L, 2);
    const spk_tensor *t[8];
    for (int i = 0; i < 8; i++)
        t[i] = layer_field(L, 1, layer, torch_names[i]);
    spk_lstm_torch_layer torch = {
        .weight_ih = {t[0], t[4]}, .weight_hh = {t[1], t[5]}, .bias_ih = {t[2], t[6]}, .bias_hh = {t[3], t[7]},
    };
    spk_lstm_weights w;
    if (spk_lstm_from_torch(&torch, layer - 1, &w))
        return spk_lua_fail(L);
    push_layer(L, &w);
    return 1;
}

/* to_torch({W, R, B}) -> {weight_ih =, ..., bias_hh_reverse =} (names without the _l<k> part) */
static int l_to_torch(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    spk_lstm_layer layer = {layer_field(L, 1, 1, "W"), layer_field(L, 1, 1, "R"), layer_field(L, 1, 1, "B")};
    spk_tensor *out[8];
    if (spk_lstm_to_torch(&layer, out))
        return spk_lua_fail(L);
    lua_createtable(L, 0, 8);
    for (int i = 0; i < 8; i++) {
        spk_lua_pushtensor(L, out[i]);
        lua_setfield(L, -2, torch_names[i]);
    }
    return 1;
}

/* random(layers, input, hidden, seed, scale, dtype) -> array of {W, R, B} */
static int l_random(lua_State *L)
{
    lua_Integer count = luaL_checkinteger(L, 1);
    lua_Integer input = luaL_checkinteger(L, 2), hidden = luaL_checkinteger(L, 3);
    lua_Integer seed = luaL_checkinteger(L, 4);
    double scale = luaL_checknumber(L, 5);
    spk_dtype dtype = spk_lua_optdtype(L, 6, SPK_F32);
    if (count < 1 || count > MAX_LAYERS)
        luaL_argerror(L, 1, lua_pushfstring(L, "layers must be in 1..%d", MAX_LAYERS));
    spk_lstm_weights w[MAX_LAYERS];
    if (spk_lstm_random((int)count, input, hidden, (uint64_t)seed, scale, dtype, w))
        return spk_lua_fail(L);
    lua_createtable(L, (int)count, 0);
    for (int k = 0; k < count; k++) {
        push_layer(L, &w[k]);
        lua_rawseti(L, -2, k + 1);
    }
    return 1;
}

static const char *const reference_options[] = {"precision", "threads", "vector", "team_threads", "layers_out",
                                                 "trace", "profile", NULL};

/* info.profile of a reference call (lstm.h, spk_lstm_reference_profile). */
static void push_profile(lua_State *L, const spk_lstm_reference_profile *p)
{
    lua_createtable(L, 0, 11);
    lua_pushstring(L, spk_cpu_vector_name(p->vector)), lua_setfield(L, -2, "vector");
    lua_pushinteger(L, p->threads), lua_setfield(L, -2, "threads");
    lua_pushinteger(L, p->teams), lua_setfield(L, -2, "teams");
    lua_pushinteger(L, p->team_threads), lua_setfield(L, -2, "team_threads");
    lua_pushinteger(L, p->slab_steps), lua_setfield(L, -2, "slab_steps");
    lua_pushnumber(L, p->wall_ms), lua_setfield(L, -2, "wall_ms");
    lua_pushnumber(L, p->project_ms), lua_setfield(L, -2, "project_ms");
    lua_pushnumber(L, p->step_ms), lua_setfield(L, -2, "step_ms");
    lua_pushnumber(L, p->wait_ms), lua_setfield(L, -2, "wait_ms");
    lua_pushnumber(L, p->project_flops), lua_setfield(L, -2, "project_flops");
    lua_pushnumber(L, p->step_flops), lua_setfield(L, -2, "step_flops");
    lua_setfield(L, -2, "profile");
}

/* Option `name` of table 3 as a thread count (left out: *out unchanged). */
static void thread_option(lua_State *L, const char *name, int *out)
{
    if (spk_lua_rawfield(L, 3, name) != LUA_TNIL) {
        int isint = 0;
        lua_Integer n = lua_tointegerx(L, -1, &isint);
        if (!isint || n < 1)
            luaL_argerror(L, 3, lua_pushfstring(L, "option '%s' must be a positive integer", name));
        *out = n > SPK_CPU_MAX_THREADS ? SPK_CPU_MAX_THREADS : (int)n;
    }
    lua_pop(L, 1);
}

/* The options saying how the CPU runs the reference: threads, team_threads, vector. */
static void check_cpu_options(lua_State *L, spk_lstm_reference_options *opt)
{
    thread_option(L, "threads", &opt->threads);
    thread_option(L, "team_threads", &opt->team_threads);
    spk_lua_rawfield(L, 3, "vector");
    if (!lua_isnil(L, -1) &&
        (lua_type(L, -1) != LUA_TSTRING || spk_cpu_vector_from_name(lua_tostring(L, -1), &opt->vector)))
        luaL_argerror(L, 3, "option 'vector' must be \"auto\", \"portable\", \"avx2\" or \"avx512\"");
    lua_pop(L, 1);
}

/* reference(layers, x, options) -> y, info (see lua/spk/lstm.lua) */
static int l_reference(lua_State *L)
{
    spk_lstm_layer layers[MAX_LAYERS];
    spk_lua_checklayers(L, 1, layers, MAX_LAYERS, NULL); /* arguments in order; the pointers are taken again after the options */
    spk_lua_checktensor(L, 2);
    spk_lstm_reference_options opt = spk_lstm_reference_defaults();
    spk_lstm_reference_profile profile;
    int64_t steps[SPK_LSTM_TRACE_MAX_STEPS];
    if (spk_lua_checkoptions(L, 3, reference_options)) {
        spk_lua_rawfield(L, 3, "precision");
        if (!lua_isnil(L, -1)) {
            const char *p = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
            if (strcmp(p, "f64") != 0 && strcmp(p, "f32") != 0)
                luaL_argerror(L, 3, "option 'precision' must be \"f64\" or \"f32\"");
            opt.precision = strcmp(p, "f64") == 0 ? SPK_F64 : SPK_F32;
        }
        lua_pop(L, 1);
        check_cpu_options(L, &opt);
        spk_lua_rawfield(L, 3, "layers_out");
        opt.layers_out = lua_toboolean(L, -1);
        lua_pop(L, 1);
        spk_lua_rawfield(L, 3, "profile");
        if (lua_toboolean(L, -1))
            opt.profile = &profile;
        lua_pop(L, 1);
        if (spk_lua_rawfield(L, 3, "trace") != LUA_TNIL) {
            spk_lstm_trace trace;
            spk_lua_read_trace(L, -1, &trace, steps);
            opt.trace_layer = trace.layer;
            opt.trace_direction = trace.direction;
            opt.trace_count = trace.count;
            opt.trace_steps = steps;
        }
        lua_pop(L, 1);
    }
    /* No allocation from here to the call: the pointers stay valid. */
    int count = spk_lua_checklayers(L, 1, layers, MAX_LAYERS, NULL);
    const spk_tensor *x = spk_lua_checktensor(L, 2);
    spk_lstm_reference_result res;
    if (spk_lstm_reference(layers, count, x, &opt, &res))
        return spk_lua_fail(L);
    /* hand every tensor to Lua at once, so an error below cannot leak them */
    spk_lua_pushtensor(L, res.y);
    lua_createtable(L, 0, 2);
    if (res.layer_count > 0) {
        lua_createtable(L, res.layer_count, 0);
        for (int k = 0; k < res.layer_count; k++) {
            spk_lua_pushtensor(L, res.layer_outputs[k]);
            lua_rawseti(L, -2, k + 1);
        }
        lua_setfield(L, -2, "layers");
    }
    if (res.trace_h) {
        spk_lstm_trace trace = {opt.trace_layer, opt.trace_direction, opt.trace_count, steps};
        spk_lua_push_trace(L, &trace, res.trace_h, res.trace_c);
        lua_setfield(L, -2, "trace");
    }
    if (opt.profile)
        push_profile(L, &profile);
    free(res.layer_outputs);
    return 2;
}

/* cpu_info() -> {vector =, vectors = {...}, threads =, threads_from =, cpus =} */
static int l_cpu_info(lua_State *L)
{
    spk_cpu_vector best;
    spk_cpu_vector_resolve(SPK_CPU_VECTOR_AUTO, &best);
    lua_createtable(L, 0, 6);
    lua_pushstring(L, spk_cpu_vector_name(best)), lua_setfield(L, -2, "vector");
    lua_pushinteger(L, spk_cpu_vector_bytes(best)), lua_setfield(L, -2, "vector_bytes");
    lua_newtable(L);
    for (int u = SPK_CPU_VECTOR_PORTABLE, n = 1; u < SPK_CPU_VECTOR_COUNT; u++)
        if (spk_cpu_vector_available((spk_cpu_vector)u))
            lua_pushstring(L, spk_cpu_vector_name((spk_cpu_vector)u)), lua_rawseti(L, -2, n++);
    lua_setfield(L, -2, "vectors");
    lua_pushinteger(L, spk_cpu_count()), lua_setfield(L, -2, "cpus");
    int threads = 0;
    const char *source = NULL;
    if (spk_cpu_threads_default(&threads, &source) == 0) {
        lua_pushinteger(L, threads), lua_setfield(L, -2, "threads");
        lua_pushstring(L, source), lua_setfield(L, -2, "threads_from");
    } else {
        lua_pushstring(L, spk_last_error()), lua_setfield(L, -2, "threads_error");
    }
    return 1;
}

/* ---- schedules ---- */

static void push_schedule(lua_State *L, const spk_schedule *s)
{
    spk_fields f = {0};
    spk_schedule_fields(s, &f);
    lua_createtable(L, 0, f.count);
    spk_lua_setfields(L, &f);
}

/* new(batch, capacity, concurrent_capacity or nil, groups, heights) -> fields */
static int l_schedule_new(lua_State *L)
{
    lua_Integer batch = luaL_checkinteger(L, 1), capacity = luaL_checkinteger(L, 2);
    lua_Integer concurrent = lua_isnoneornil(L, 3) ? SPK_SCHEDULE_UNKNOWN : luaL_checkinteger(L, 3);
    lua_Integer groups = luaL_checkinteger(L, 4);
    int64_t heights[SPK_SCHEDULE_MAX_HEIGHTS];
    int n = spk_lua_checkintegers(L, 5, heights, 1, SPK_SCHEDULE_MAX_HEIGHTS, "heights");
    spk_schedule s;
    if (spk_schedule_new(&s, batch, capacity, concurrent, groups, heights, n))
        return spk_lua_fail(L);
    push_schedule(L, &s);
    return 1;
}

/* Reads an integer field of a schedule table, an error naming it otherwise. */
static int64_t schedule_field(lua_State *L, int idx, const char *key)
{
    spk_lua_rawfield(L, idx, key);
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint || lua_type(L, -1) != LUA_TNUMBER) /* no strings such as "3" */
        luaL_error(L, "schedule check: field '%s' must be an integer, got %s", key, luaL_typename(L, -1));
    lua_pop(L, 1);
    return v;
}

/* launches(tiles, tiles_per_launch) -> { {first = 0, count = n}, ... } */
static int l_schedule_launches(lua_State *L)
{
    spk_schedule s = {.tiles = luaL_checkinteger(L, 1), .tiles_per_launch = luaL_checkinteger(L, 2)};
    int64_t n = spk_schedule_launch_count(&s);
    lua_createtable(L, (int)n, 0);
    for (int64_t i = 0; i < n; i++) {
        int64_t first, count;
        spk_schedule_launch(&s, i, &first, &count);
        lua_createtable(L, 0, 2);
        spk_lua_setint(L, "first", first);
        spk_lua_setint(L, "count", count);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* check(schedule fields, batch, launches list) -> true, or an error */
static int l_schedule_check(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer batch = luaL_checkinteger(L, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    spk_schedule s = {
        .batch = batch,
        .tile_rows = schedule_field(L, 1, "tile_rows"),
        .tiles = schedule_field(L, 1, "tiles"),
        .tiles_per_launch = schedule_field(L, 1, "tiles_per_launch"),
        .groups = schedule_field(L, 1, "groups"),
    };
    lua_Integer n = (lua_Integer)lua_rawlen(L, 3);
    int64_t *firsts = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)(n > 0 ? n : 1), 0);
    int64_t *counts = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)(n > 0 ? n : 1), 0);
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_rawgeti(L, 3, i) != LUA_TTABLE)
            return luaL_error(L, "schedule check: launch %d is not a table {first =, count =}", (int)i);
        int at = lua_gettop(L);
        firsts[i - 1] = schedule_field(L, at, "first");
        counts[i - 1] = schedule_field(L, at, "count");
        lua_pop(L, 1);
    }
    if (spk_schedule_check(&s, batch, firsts, counts, n))
        return spk_lua_fail(L);
    lua_pushboolean(L, 1);
    return 1;
}

/* ---- ONNX files (lstm/onnx_stack.h) ---- */

/* onnx.load_lstm(path) -> {{W =, R =, B =}, ...} (lua/spk/lstm.lua calls it for .onnx paths) */
static int l_load_onnx(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    spk_lstm_weights w[SPK_LSTM_ONNX_MAX_LAYERS];
    int count;
    if (spk_lstm_load_onnx(path, w, SPK_LSTM_ONNX_MAX_LAYERS, &count))
        return spk_lua_fail(L);
    lua_createtable(L, count, 0);
    for (int k = 0; k < count; k++) {
        push_layer(L, &w[k]);
        lua_rawseti(L, -2, k + 1);
    }
    return 1;
}

/* onnx.save_lstm(path, layers) */
static int l_save_onnx(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    spk_lstm_layer layers[SPK_LSTM_ONNX_MAX_LAYERS];
    int count = spk_lua_checklayers(L, 2, layers, SPK_LSTM_ONNX_MAX_LAYERS, NULL);
    return spk_lstm_save_onnx(path, layers, count) != 0 ? spk_lua_fail(L) : 0;
}

static const spk_lua_checked_reg onnx_functions[] = {
    {"load_lstm", l_load_onnx,
     "spk.onnx.load_lstm(path) -> {{W =, R =, B =}, ...}\n"
     "The LSTM stack of an ONNX model in spk's layout (spk.lstm.load calls it for .onnx paths).",
     "path"},
    {"save_lstm", l_save_onnx,
     "spk.onnx.save_lstm(path, layers)\n"
     "Writes the stack as an ONNX model x [batch, steps, in] -> y [batch, steps, 2H] (spk.lstm.save,\n"
     "format \"onnx\").",
     "path, layers"},
    {NULL, NULL, NULL, NULL},
};

void spk_open_lstm(lua_State *L, int module)
{
    static const spk_lua_checked_reg lstm[] = {
        {"validate", l_validate,
         "spk.lstm.validate(layers) -> {layers = n, hidden = H, input = in}\n"
         "Checks a stack {{W = [2, 4H, in], R = [2, 4H, H], B = [2, 8H]}, ...} (ONNX layout, f32 or f64):\n"
         "shapes, dtypes and the chain of inputs (2H after layer 1); an error names the layer and tensor.", "layers"},
        {"pack_directions", l_pack_directions,
         "spk.core.lstm.pack_directions(W, from, to) -> tensor\nWhat spk.lstm.pack_directions calls (orders given).", "W, from, to"},
        {"unpack_directions", l_unpack_directions,
         "spk.core.lstm.unpack_directions(P, from, to) -> tensor\nWhat spk.lstm.unpack_directions calls (orders given).", "P, from, to"},
        {"pack_bias", l_pack_bias,
         "spk.core.lstm.pack_bias(B, from, to) -> tensor\nWhat spk.lstm.pack_bias calls (orders given).", "B, from, to"},
        {"reorder_gates", l_reorder_gates,
         "spk.lstm.reorder_gates(t, dim, from, to) -> tensor\n"
         "The four gate blocks along dimension dim (1-based, size 4H) moved from gate order `from` to `to`\n"
         "(permutations of \"" SPK_GATES_ONNX "\"; PyTorch's i, f, g, o is \"" SPK_GATES_TORCH "\").",
         "t, dim, from, to"},
        {"from_torch", l_from_torch,
         "spk.core.lstm.from_torch({weight_ih =, weight_hh =, bias_ih =, bias_hh =, *_reverse =}, layer) -> {W, R, B}\n"
         "One nn.LSTM layer's tensors in ONNX layout (what spk.lstm.load does with PyTorch names).", "tensors, layer"},
        {"to_torch", l_to_torch,
         "spk.core.lstm.to_torch({W =, R =, B =}) -> {weight_ih =, ..., bias_hh_reverse =}\n"
         "One layer in nn.LSTM's names and gate order (what spk.lstm.save{format = \"torch\"} writes).", "layer"},
        {"random", l_random,
         "spk.core.lstm.random(layers, input, hidden, seed, scale, dtype) -> layers\nWhat spk.lstm.random calls.", "layers, input, hidden, seed, scale, dtype"},
        {"reference", l_reference,
         "spk.core.lstm.reference(layers, x, options) -> y, info\nWhat spk.lstm.reference calls.", "layers, x, options"},
        {"cpu_info", l_cpu_info,
         "spk.lstm.cpu_info() -> {vector =, vector_bytes =, vectors = {...}, cpus =, threads =, threads_from =}\n"
         "What the CPU path (spk.lstm.reference, the cpu backend) runs on: the widest vector unit this CPU\n"
         "has (\"avx512\", \"avx2\" or \"portable\"), all it has, the CPUs this process may use, and the\n"
         "default thread count and where it comes from (\"SPK_THREADS\" or \"cpus\"; threads_error instead\n"
         "when SPK_THREADS is not a thread count).",
         ""},
        {NULL, NULL, NULL, NULL},
    };
    static const spk_lua_checked_reg schedule[] = {
        {"new", l_schedule_new,
         "spk.core.schedule.new(batch, capacity, concurrent_capacity, groups, heights) -> fields\n"
         "What spk.schedule.new calls.", "batch, capacity, concurrent_capacity, groups, heights"},
        {"launches", l_schedule_launches,
         "spk.core.schedule.launches(tiles, tiles_per_launch) -> {{first = 0, count = n}, ...}\n"
         "The launch ranges of a schedule (0-based tiles, as the kernel sees them).", "tiles, tiles_per_launch"},
        {"check", l_schedule_check,
         "spk.core.schedule.check(fields, batch, launches) -> true\nWhat spk.schedule.check calls.", "fields, batch, launches"},
        {NULL, NULL, NULL, NULL},
    };
    lua_newtable(L);
    spk_lua_setfuncs_module(L, lstm, "spk.lstm");
    lua_createtable(L, 0, 3); /* the gate orders spk names (lstm/lstm.h) */
    spk_lua_setstring(L, "onnx", SPK_GATES_ONNX);
    spk_lua_setstring(L, "torch", SPK_GATES_TORCH);
    spk_lua_setstring(L, "packed", SPK_GATES_PACKED);
    lua_setfield(L, -2, "gate_orders");
    lua_createtable(L, 0, SPK_MATH_COUNT); /* what a plan's variant text adds for each math */
    for (int i = 0; i < SPK_MATH_COUNT; i++)
        spk_lua_setstring(L, spk_math_mode_names[i], spk_lstm_math_suffix((spk_math_mode)i));
    lua_setfield(L, -2, "math_suffixes");
    lua_setfield(L, module, "lstm");
    lua_newtable(L);
    spk_lua_setfuncs_module(L, schedule, "spk.core.schedule");
    lua_setfield(L, module, "schedule");
    lua_newtable(L);
    spk_lua_setfuncs_module(L, onnx_functions, "spk.onnx");
    lua_setfield(L, module, "onnx");
}
