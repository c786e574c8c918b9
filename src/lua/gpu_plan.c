/* Shared pieces of the GPU stack plan bindings: see gpu_plan.h. */
#include "lua/gpu_plan.h"

#include <string.h>

typedef struct lua_gpu_plan {
    void *plan;
} lua_gpu_plan;

lua_Integer spk_lua_int_field(lua_State *L, int t, const char *name, lua_Integer def, const char *where)
{
    lua_Integer v = def;
    if (spk_lua_rawfield(L, t, name) != LUA_TNIL) {
        int ok;
        v = lua_tointegerx(L, -1, &ok);
        if (!ok)
            luaL_error(L, "%s.%s must be an integer, got %s", where, name, luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    return v;
}

spk_math_mode spk_lua_read_math(lua_State *L, int t)
{
    spk_math_mode math = SPK_MATH_FP32;
    if (spk_lua_rawfield(L, t, "math") != LUA_TNIL) {
        const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        if (!name || (strcmp(name, "fp32") != 0 && strcmp(name, "tf32") != 0))
            luaL_error(L, "stack.math must be \"fp32\" or \"tf32\", got %s", name ? name : luaL_typename(L, -1));
        math = strcmp(name, "tf32") == 0 ? SPK_MATH_TF32 : SPK_MATH_FP32;
    }
    lua_pop(L, 1);
    return math;
}

static spk_lstm_layer *read_layers(lua_State *L, int idx, int *count)
{
    if (lua_type(L, idx) != LUA_TTABLE)
        luaL_error(L, "lstm stack: layers must be a list of {W =, R =, B =}, got %s", luaL_typename(L, idx));
    int n = spk_lua_rawcount(L, idx);
    if (n < 1)
        luaL_error(L, "lstm stack: layers is empty");
    spk_lstm_layer *layers = lua_newuserdatauv(L, sizeof *layers * (size_t)n, 0); /* freed by the GC */
    static const char *names[3] = {"W", "R", "B"};
    for (int i = 0; i < n; i++) {
        if (lua_rawgeti(L, idx, i + 1) != LUA_TTABLE)
            luaL_error(L, "lstm stack: layer %d must be a table {W =, R =, B =}", i + 1);
        const spk_tensor **slots[3] = {&layers[i].W, &layers[i].R, &layers[i].B};
        for (int k = 0; k < 3; k++) {
            spk_lua_rawfield(L, -1, names[k]);
            spk_tensor *t = spk_lua_totensor(L, -1);
            if (!t)
                luaL_error(L, "lstm stack: layer %d: %s must be a tensor, got %s", i + 1, names[k],
                           luaL_typename(L, -1));
            *slots[k] = t;
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    *count = n;
    return layers;
}

const spk_lstm_layer *spk_lua_read_stack_shape(lua_State *L, int *count, int64_t *batch, int64_t *steps)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    spk_lua_rawfield(L, 1, "layers");
    const spk_lstm_layer *layers = read_layers(L, lua_gettop(L), count);
    *batch = spk_lua_int_field(L, 1, "batch", 0, "stack");
    *steps = spk_lua_int_field(L, 1, "steps", 0, "stack");
    return layers;
}

void spk_lua_set_defines(lua_State *L, const spk_define *defines, int count)
{
    lua_createtable(L, 0, count);
    for (int i = 0; i < count; i++) {
        lua_pushstring(L, defines[i].value);
        lua_setfield(L, -2, defines[i].name);
    }
    lua_setfield(L, -2, "defines");
}

void spk_lua_set_gpu_shape(lua_State *L, const spk_lstm_gpu_shape *shape)
{
    lua_pushinteger(L, shape->layers), lua_setfield(L, -2, "layers");
    lua_pushinteger(L, shape->hidden), lua_setfield(L, -2, "hidden");
    lua_pushinteger(L, shape->input), lua_setfield(L, -2, "input");
    lua_pushinteger(L, shape->batch), lua_setfield(L, -2, "batch");
    lua_pushinteger(L, shape->steps), lua_setfield(L, -2, "steps");
    lua_pushstring(L, spk_lstm_math_name(shape->math)), lua_setfield(L, -2, "math");
}

/* The plan type is the upvalue of every method and metamethod. */
static const spk_lua_gpu_plan_type *upvalue_type(lua_State *L)
{
    return lua_touserdata(L, lua_upvalueindex(1));
}

void **spk_lua_gpu_plan_push(lua_State *L, const spk_lua_gpu_plan_type *type)
{
    lua_gpu_plan *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->plan = NULL;
    luaL_setmetatable(L, type->metatable);
    return &u->plan;
}

void *spk_lua_gpu_plan_check(lua_State *L, const spk_lua_gpu_plan_type *type)
{
    lua_gpu_plan *u = luaL_checkudata(L, 1, type->metatable);
    if (!u->plan)
        luaL_error(L, "lstm stack: the plan is closed");
    return u->plan;
}

static int plan_time(lua_State *L)
{
    const spk_lua_gpu_plan_type *type = upvalue_type(L);
    spk_lua_gpu_plan_check(L, type); /* a closed self first */
    spk_lua_noextra(L, 4);
    spk_lua_checktensor(L, 2);
    lua_Integer rounds = luaL_optinteger(L, 3, 7), warmup = luaL_optinteger(L, 4, 2);
    if (rounds < 1 || rounds > 100000 || warmup < 0 || warmup > 100000)
        return luaL_error(L, "lstm stack time: rounds must be 1..100000 and warmup 0..100000");
    double *ms = lua_newuserdatauv(L, sizeof *ms * (size_t)rounds, 0);
    /* taken after the allocation, which may run a finalizer that closes them */
    void *p = spk_lua_gpu_plan_check(L, type);
    spk_tensor *x = spk_lua_checktensor(L, 2);
    if (type->time(p, x, (int)rounds, (int)warmup, ms) != 0)
        return spk_lua_fail(L);
    lua_createtable(L, (int)rounds, 0);
    for (lua_Integer i = 0; i < rounds; i++) {
        lua_pushnumber(L, ms[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* Idempotent release shared by __gc and __close. */
static int plan_close(lua_State *L)
{
    const spk_lua_gpu_plan_type *type = upvalue_type(L);
    lua_gpu_plan *u = luaL_checkudata(L, 1, type->metatable);
    type->free(u->plan);
    u->plan = NULL;
    return 0;
}

/* plan:close(): the release, refusing extra arguments (which __close gets). */
static int plan_close_method(lua_State *L)
{
    spk_lua_noextra(L, 1);
    return plan_close(L);
}

static int plan_tostring(lua_State *L)
{
    const spk_lua_gpu_plan_type *type = upvalue_type(L);
    lua_gpu_plan *u = luaL_checkudata(L, 1, type->metatable);
    if (!u->plan)
        lua_pushstring(L, type->closed_name);
    else
        type->push_name(L, u->plan);
    return 1;
}

void spk_lua_gpu_plan_register(lua_State *L, const spk_lua_gpu_plan_type *type, lua_CFunction forward,
                               lua_CFunction info)
{
    const spk_lua_reg methods[] = {
        {"forward", forward,
         "plan:forward(x) -> y\nx f32 [batch, steps, in] on the host or the device; y [batch, steps, 2H] on x's side."},
        {"time", plan_time,
         "plan:time(x, rounds, warmup) -> {ms, ...}\nCUDA-graph replays of one forward, each timed by events."},
        {"info", info, "plan:info() -> {kernel =, schedule =, ...}\nThe compiled variant, its resources and the schedule."},
        {"close", plan_close_method, "plan:close()\nFrees the plan's device memory now (also <close> and collection)."},
        {NULL, NULL, NULL}};
    static const luaL_Reg meta[] = {
        {"__gc", plan_close}, {"__close", plan_close}, {"__tostring", plan_tostring}, {NULL, NULL}};
    if (luaL_newmetatable(L, type->metatable)) {
        lua_pushlightuserdata(L, (void *)type);
        luaL_setfuncs(L, meta, 1);
        lua_createtable(L, 0, 4);
        lua_pushlightuserdata(L, (void *)type);
        spk_lua_setfuncs(L, methods, 1);
        spk_lua_settype(L, type->metatable, -1,
                        "GPU stack plan: the C plan inside spk.lstm.stack's persistent and cluster plans (plan.plan).");
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
}
