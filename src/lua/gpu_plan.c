/* Shared pieces of the GPU stack plan bindings: see gpu_plan.h. */
#include "lua/gpu_plan.h"

#include <string.h>

#include "core/error.h"
#include "lua/timeline.h"
#include "lstm/kernel_stack.h"

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
        /* the names and the stacks' rule are the C side's (spk_math_mode_from_name, spk_lstm_check_math) */
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "stack.math must be a string, got %s", luaL_typename(L, -1));
        if (spk_math_mode_from_name(lua_tostring(L, -1), &math) != 0 || spk_lstm_check_math(math) != 0)
            spk_lua_fail(L);
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

void spk_lua_read_kernel_choice(lua_State *L, int idx, const spk_kernel_family *f, spk_kernel_choice *choice)
{
    memset(choice, 0, sizeof *choice);
    if (lua_isnoneornil(L, idx))
        return;
    if (lua_type(L, idx) != LUA_TTABLE)
        luaL_error(L, "kernel must be a table of kernel options, got %s", luaL_typename(L, idx));
    int t = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, t)) { /* raw: no metamethod runs */
        int option = lua_type(L, -2) == LUA_TSTRING ? spk_kernel_option_index(f, lua_tostring(L, -2))
                                                     : spk_fail("kernel options are named by strings, got a %s key",
                                                                luaL_typename(L, -2));
        int rc = option;
        if (option >= 0) {
            int isint = 0;
            lua_Integer value = lua_tointegerx(L, -1, &isint);
            if (lua_type(L, -1) == LUA_TNUMBER && isint)
                rc = spk_kernel_choice_set_int(f, choice, option, (long long)value);
            else if (lua_type(L, -1) == LUA_TSTRING)
                rc = spk_kernel_choice_set_word(f, choice, option, lua_tostring(L, -1));
            else
                rc = spk_kernel_option_refuse(&f->options[option], luaL_typename(L, -1));
        }
        if (rc < 0)
            spk_lua_fail(L);
        lua_pop(L, 1);
    }
}

void spk_lua_set_kernel_options(lua_State *L, const spk_kernel_family *f, const void *variant)
{
    for (int i = 0; i < f->count; i++) {
        const spk_kernel_option *o = &f->options[i];
        int value = spk_kernel_option_get(o, variant);
        const char *word = spk_kernel_option_word(o, value);
        if (word)
            lua_pushstring(L, word);
        else
            lua_pushinteger(L, value);
        lua_setfield(L, -2, o->name);
    }
    spk_define defines[SPK_KERNEL_OPTIONS_MAX];
    char text[SPK_KERNEL_OPTIONS_MAX][16];
    int count = spk_kernel_defines(f, variant, defines, text);
    lua_createtable(L, 0, count);
    for (int i = 0; i < count; i++) {
        lua_pushstring(L, defines[i].value);
        lua_setfield(L, -2, defines[i].name);
    }
    lua_setfield(L, -2, "defines");
}

void spk_lua_push_kernel_family(lua_State *L, const spk_kernel_family *f)
{
    static const char *defaults[] = {[SPK_DEFAULT_LAYERS] = "layers", [SPK_DEFAULT_BATCH] = "batch",
                                     [SPK_DEFAULT_FIT] = "fit"};
    lua_createtable(L, 0, 4);
    lua_pushstring(L, f->backend), lua_setfield(L, -2, "backend");
    lua_createtable(L, f->count, 0);
    for (int i = 0; i < f->count; i++) {
        const spk_kernel_option *o = &f->options[i];
        lua_createtable(L, 0, 8);
        lua_pushstring(L, o->name), lua_setfield(L, -2, "name");
        if (o->macro)
            lua_pushstring(L, o->macro), lua_setfield(L, -2, "macro");
        if (o->words[0]) {
            lua_createtable(L, SPK_OPTION_WORDS, 0);
            for (int w = 0; w < SPK_OPTION_WORDS && o->words[w]; w++)
                lua_pushstring(L, o->words[w]), lua_rawseti(L, -2, w + 1);
            lua_setfield(L, -2, "words");
        } else {
            lua_pushinteger(L, o->min), lua_setfield(L, -2, "min");
            lua_pushinteger(L, o->max), lua_setfield(L, -2, "max");
            if (o->allowed) {
                lua_createtable(L, 8, 0);
                int n = 0;
                for (int v = o->min; v <= o->max && v < 64; v++)
                    if (o->allowed & SPK_BIT(v))
                        lua_pushinteger(L, v), lua_rawseti(L, -2, ++n);
                lua_setfield(L, -2, "values");
            }
        }
        char values[160];
        spk_kernel_option_values(o, values, sizeof values);
        lua_pushstring(L, values), lua_setfield(L, -2, "takes");
        lua_pushstring(L, defaults[o->from]), lua_setfield(L, -2, "default");
        lua_pushstring(L, o->help), lua_setfield(L, -2, "help");
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "options");
    lua_createtable(L, f->nrules, 0);
    for (int r = 0; r < f->nrules; r++)
        lua_pushstring(L, f->rules[r].message), lua_rawseti(L, -2, r + 1);
    lua_setfield(L, -2, "rules");
    int n = spk_kernel_family_describe(f, NULL, 0);
    char *text = lua_newuserdatauv(L, (size_t)n + 1, 0);
    spk_kernel_family_describe(f, text, (size_t)n + 1);
    lua_pushstring(L, text);
    lua_remove(L, -2);
    lua_setfield(L, -2, "text");
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

void spk_lua_read_trace(lua_State *L, int idx, spk_lstm_trace *trace, int64_t *steps)
{
    if (lua_type(L, idx) != LUA_TTABLE)
        luaL_error(L, "trace must be a table {layer =, direction =, steps =}, got %s", luaL_typename(L, idx));
    int t = lua_absindex(L, idx);
    static const char *const keys[] = {"layer", "direction", "steps", NULL};
    spk_lua_checkkeys(L, t, keys, "trace");
    int isint = 0;
    spk_lua_rawfield(L, t, "layer");
    lua_Integer layer = lua_tointegerx(L, -1, &isint);
    if (!isint)
        luaL_error(L, "trace.layer must be a layer number (from 1), got %s", luaL_typename(L, -1));
    spk_lua_rawfield(L, t, "direction");
    const char *dir = lua_isnil(L, -1) ? "forward" : lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    if (!dir || (strcmp(dir, "forward") != 0 && strcmp(dir, "reverse") != 0))
        luaL_error(L, "trace.direction must be \"forward\" or \"reverse\"");
    if (spk_lua_rawfield(L, t, "steps") != LUA_TTABLE)
        luaL_error(L, "trace.steps must be a list of time positions (from 1)");
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    if (n < 1 || n > SPK_LSTM_TRACE_MAX_STEPS)
        luaL_error(L, "trace.steps must list 1 to %d time positions, got %d", SPK_LSTM_TRACE_MAX_STEPS, (int)n);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        lua_Integer step = lua_tointegerx(L, -1, &isint);
        if (!isint)
            luaL_error(L, "trace.steps[%d] must be an integer, got %s", (int)i, luaL_typename(L, -1));
        steps[i - 1] = (int64_t)step - 1;
        lua_pop(L, 1);
    }
    lua_pop(L, 3);
    trace->layer = layer < INT32_MIN + 1 || layer > INT32_MAX ? -1 : (int)(layer - 1);
    trace->direction = strcmp(dir, "reverse") == 0;
    trace->count = (int)n;
    trace->steps = steps;
}

void spk_lua_push_traced(lua_State *L, spk_tensor *y, const spk_lstm_trace *trace, spk_tensor *h, spk_tensor *c)
{
    spk_lua_pushtensor(L, y);
    lua_createtable(L, 0, 1);
    lua_createtable(L, 0, 5);
    spk_lua_pushtensor(L, h), lua_setfield(L, -2, "h");
    spk_lua_pushtensor(L, c), lua_setfield(L, -2, "c");
    lua_pushinteger(L, trace->layer + 1), lua_setfield(L, -2, "layer");
    lua_pushstring(L, trace->direction ? "reverse" : "forward"), lua_setfield(L, -2, "direction");
    lua_createtable(L, trace->count, 0);
    for (int e = 0; e < trace->count; e++) {
        lua_pushinteger(L, trace->steps[e] + 1);
        lua_rawseti(L, -2, e + 1);
    }
    lua_setfield(L, -2, "steps");
    lua_setfield(L, -2, "trace");
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
    /* a timeline selection only for a plan with a timeline build */
    spk_lua_noextra(L, type->time_timeline ? 5 : 4);
    spk_lua_checktensor(L, 2);
    lua_Integer rounds = luaL_optinteger(L, 3, 7), warmup = luaL_optinteger(L, 4, 2);
    if (rounds < 1 || rounds > 100000 || warmup < 0 || warmup > 100000)
        return luaL_error(L, "lstm stack time: rounds must be 1..100000 and warmup 0..100000");
    spk_timeline_selection sel;
    bool timeline = !lua_isnoneornil(L, 5);
    if (timeline)
        spk_lua_read_timeline_selection(L, 5, &sel);
    double *ms = lua_newuserdatauv(L, sizeof *ms * (size_t)rounds, 0);
    /* taken after the allocation, which may run a finalizer that closes them */
    void *p = spk_lua_gpu_plan_check(L, type);
    spk_tensor *x = spk_lua_checktensor(L, 2);
    if ((timeline ? type->time_timeline(p, x, &sel, (int)rounds, (int)warmup, ms)
                  : type->time(p, x, (int)rounds, (int)warmup, ms)) != 0)
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
         "plan:forward(x[, {timeline = selection}]) -> y[, stamps, columns, clock, build]\nx f32 [batch, steps, in] "
         "on the host or the device; y [batch, steps, 2H] on x's side. With a timeline selection\n(0-based, "
         "spk.timeline.selection's C form) through the timeline build recording it, and the decoded\nstamps "
         "(spk.timeline.make reads them); the persistent plan also takes {trace = {...}}."},
        {"time", plan_time,
         "plan:time(x, rounds, warmup[, selection]) -> {ms, ...}\nCUDA-graph replays of one forward, each timed by "
         "events; with a timeline selection (0-based,\nspk.timeline.selection's C form) through the timeline build "
         "recording it."},
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
                        "GPU stack plan: the C plan inside spk.lstm.stack's persistent and cluster plans (plan.handle).");
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
}
