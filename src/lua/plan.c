/* Bindings of the one plan of the GPU LSTM stack (lstm/stack_plan.h) and of
 * the built-in kernel families (lstm/family.h): thin, every option and
 * default is a family's. lua/spk/families.lua builds spk.lstm's backends,
 * spk.lstm.kernel_variant and kernel_options on them.
 *   core.plan_new{backend =, layers =, batch =, steps =, math =, kernel = {...}, schedule =, capacity =,
 *                 timeout_ms =} -> plan (the options a family takes: its accepts)
 *   plan:forward(x[, {trace = {layer =, direction =, steps =}} | {timeline = selection}])
 *        -> y; with a trace y, {h =, c =, layer =, direction =, steps =}; with a timeline (the C
 *        selection, 0-based, as lua/timeline.h reads it) y, stamps, columns, clock, build
 *   plan:time(x, rounds, warmup[, selection]) -> {ms, ...}
 *   plan:info() -> {kernel = {...}, schedule = {...}, timeline = {stages =, waits_for =, blocks =,
 *                   warps =, group =}, variant =, layers =, hidden =, input =, batch =, steps =, math =}
 *   plan:close()
 *   core.kernel_families() -> {{backend =, title =, summary =, options = <option table>, schedule =,
 *                   capacity =, timeout_ms =, trace =, timeline =}, ...}
 *   core.kernel_variant(backend, kernel | nil, batch, hidden) -> the variant a plan of that batch compiles
 *                   (its options, sizes, defines and timeline = {stages =, waits_for =})
 *   core.trace_check(trace, layers, steps) -> true, or the error a traced forward gives
 *   core.persistent_schedule_fits(schedule, kernel, capacity[, concurrent[, hidden]]) -> true
 *   core.cluster_schedule_pick(batch, {heights}, {max_active}[, tile_rows]) -> schedule
 * Argument tables are read raw and the tensors' pointers taken after the last
 * allocation (lua/bind.h). */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "lstm/cluster.h"
#include "lstm/device_layers.h"
#include "lstm/persistent.h"
#include "lua/areas.h"
#include "lua/plan.h"
#include "lua/timeline.h"

/* ---- reading a plan's options ---------------------------------------------- */

int spk_lua_read_stack(lua_State *L, spk_lstm_layer *layers, int64_t *batch, int64_t *steps, spk_math_mode *math)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    spk_lua_rawfield(L, 1, "layers"); /* stays on the stack: it keeps the tensors alive */
    int count = spk_lua_checklayers(L, -1, layers, SPK_LUA_PLAN_MAX_LAYERS);
    *batch = spk_lua_intfield(L, 1, "batch", 0, INT64_MIN, INT64_MAX, "stack");
    *steps = spk_lua_intfield(L, 1, "steps", 0, INT64_MIN, INT64_MAX, "stack");
    spk_lua_rawfield(L, 1, "math");
    *math = (spk_math_mode)spk_lua_checkoption(L, -1, SPK_MATH_FP32, spk_math_mode_names, "stack.math");
    lua_pop(L, 1);
    if (spk_lstm_check_math(*math) != 0)
        spk_lua_fail(L);
    return count;
}

/* A kernel table (at idx; nil: no option given) into `choice` through the
 * family's option table, read raw; a key the family does not know or a
 * value an option does not take is a Lua error naming it. */
static void read_kernel_choice(lua_State *L, int idx, const spk_kernel_family *f, spk_kernel_choice *choice)
{
    memset(choice, 0, sizeof *choice);
    if (lua_isnoneornil(L, idx))
        return;
    if (lua_type(L, idx) != LUA_TTABLE)
        luaL_error(L, "kernel must be a table of kernel options, got %s", spk_lua_describe(L, idx));
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

/* A tile schedule table made by a script or spk.schedule.new. */
static void read_schedule(lua_State *L, int idx, spk_schedule *s)
{
    luaL_checktype(L, idx, LUA_TTABLE);
    int t = lua_absindex(L, idx);
    memset(s, 0, sizeof *s);
    s->batch = spk_lua_intfield(L, t, "batch", 0, INT64_MIN, INT64_MAX, "schedule");
    s->groups = spk_lua_intfield(L, t, "groups", 0, INT64_MIN, INT64_MAX, "schedule");
    s->tile_rows = spk_lua_intfield(L, t, "tile_rows", 0, INT64_MIN, INT64_MAX, "schedule");
    s->tiles = spk_lua_intfield(L, t, "tiles", 0, INT64_MIN, INT64_MAX, "schedule");
    s->tiles_per_launch = spk_lua_intfield(L, t, "tiles_per_launch", s->tiles, INT64_MIN, INT64_MAX, "schedule");
    spk_lua_rawfield(L, t, "concurrent");
    s->concurrent = lua_toboolean(L, -1);
    lua_pop(L, 1);
}

static const spk_family *check_family(lua_State *L, int idx)
{
    const spk_family *f = spk_family_find(luaL_checkstring(L, idx));
    if (!f)
        spk_lua_fail(L);
    return f;
}

/* ---- pushing what a plan reports ----------------------------------------------- */

/* Sets each field on the table at the top. */
static void set_fields(lua_State *L, const spk_fields *f)
{
    for (int i = 0; i < f->count; i++) {
        const spk_field *x = &f->at[i];
        if (x->kind == SPK_FIELD_TEXT)
            lua_pushstring(L, x->text);
        else if (x->kind == SPK_FIELD_BOOL)
            lua_pushboolean(L, x->value != 0);
        else
            lua_pushinteger(L, (lua_Integer)x->value);
        lua_setfield(L, -2, x->name);
    }
}

/* t.defines = {MACRO = "value", ...} of a family's variant on the table at the top. */
static void set_defines(lua_State *L, const spk_kernel_family *f, const void *variant)
{
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

/* A family's option table as data: {backend =, options = {{name =, macro =,
 * words = {...} | values = {...} | min =, max =, takes =, default = "layers"
 * | "batch" | "fit", help =}, ...}, rules = {message, ...}, text = what spk
 * help prints}. */
static void push_option_table(lua_State *L, const spk_kernel_family *f)
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

/* Sets layers, hidden, input, batch, steps and math on the table at the top. */
static void set_shape(lua_State *L, const spk_lstm_gpu_shape *shape)
{
    lua_pushinteger(L, shape->layers), lua_setfield(L, -2, "layers");
    lua_pushinteger(L, shape->hidden), lua_setfield(L, -2, "hidden");
    lua_pushinteger(L, shape->input), lua_setfield(L, -2, "input");
    lua_pushinteger(L, shape->batch), lua_setfield(L, -2, "batch");
    lua_pushinteger(L, shape->steps), lua_setfield(L, -2, "steps");
    lua_pushstring(L, spk_lstm_math_name(shape->math)), lua_setfield(L, -2, "math");
}

/* ---- the plan userdata ---------------------------------------------------------- */

static spk_stack_plan *self_plan(lua_State *L) { return spk_lua_checkobject(L, 1, &spk_lua_plan_type); }

/* forward(x, {timeline = selection}) with the selection at the top of the stack. */
static int forward_timeline(lua_State *L)
{
    spk_timeline_selection sel;
    spk_lua_read_timeline_selection(L, -1, &sel);
    spk_stack_plan *p = self_plan(L);
    const spk_tensor *x = spk_lua_checktensor(L, 2);
    spk_tensor *stamps = NULL;
    spk_timeline_clock clock;
    spk_fields build = {0};
    spk_tensor *y = spk_stack_plan_forward_timeline(p, x, &sel, &stamps, &clock, &build);
    if (!y)
        return spk_lua_fail(L);
    /* a static list, taken before the tables below may run a finalizer that closes the plan */
    const spk_timeline_stages *stages = spk_stack_plan_stages(p);
    spk_lua_pushtensor(L, y);
    spk_lua_pushtensor(L, stamps);
    spk_lua_push_timeline_columns(L, stages);
    spk_lua_push_timeline_clock(L, &clock);
    lua_createtable(L, 0, build.count);
    set_fields(L, &build);
    return 5;
}

/* forward(x, {trace = t}) with t at the top of the stack. */
static int forward_trace(lua_State *L)
{
    int64_t *steps = lua_newuserdatauv(L, sizeof *steps * SPK_LSTM_TRACE_MAX_STEPS, 0);
    spk_lstm_trace trace;
    spk_lua_read_trace(L, -2, &trace, steps);
    spk_stack_plan *p = self_plan(L); /* after the allocation */
    spk_tensor *x = spk_lua_checktensor(L, 2);
    spk_tensor *h = NULL, *c = NULL;
    spk_tensor *y = spk_stack_plan_forward_trace(p, x, &trace, &h, &c);
    if (!y)
        return spk_lua_fail(L);
    spk_lua_pushtensor(L, y);
    spk_lua_push_trace(L, &trace, h, c);
    return 2;
}

static int plan_forward(lua_State *L)
{
    spk_lua_checktensor(L, 2);
    if (!lua_isnoneornil(L, 3)) {
        if (lua_type(L, 3) != LUA_TTABLE)
            return luaL_error(L, "forward: options must be a table {trace =} or {timeline =}, got %s",
                              spk_lua_describe(L, 3));
        static const char *const keys[] = {"trace", "timeline", NULL};
        spk_lua_checkkeys(L, 3, keys, "forward");
        bool trace = spk_lua_rawfield(L, 3, "trace") != LUA_TNIL;
        bool timeline = spk_lua_rawfield(L, 3, "timeline") != LUA_TNIL;
        if (trace && timeline)
            return luaL_error(L, "forward: trace and timeline are separate builds of the kernel; ask for one at a "
                                 "time");
        if (timeline)
            return forward_timeline(L);
        lua_pop(L, 1);
        if (trace)
            return forward_trace(L);
    }
    spk_lua_pushtensor(L, spk_stack_plan_forward(self_plan(L), spk_lua_checktensor(L, 2)));
    return 1;
}

static int plan_time(lua_State *L)
{
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
    spk_stack_plan *p = self_plan(L);
    spk_tensor *x = spk_lua_checktensor(L, 2);
    if ((timeline ? spk_stack_plan_time_timeline(p, x, &sel, (int)rounds, (int)warmup, ms)
                  : spk_stack_plan_time(p, x, (int)rounds, (int)warmup, ms)) != 0)
        return spk_lua_fail(L);
    lua_createtable(L, (int)rounds, 0);
    for (lua_Integer i = 0; i < rounds; i++) {
        lua_pushnumber(L, ms[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* What the plan reports, copied before the tables are made (any may run a
 * finalizer that closes the plan). */
typedef struct plan_report {
    const spk_family *family;
    spk_family_state state;
    spk_lstm_gpu_shape shape;
    spk_fields kernel, schedule;
    const spk_timeline_stages *stages;
    int64_t blocks;
    int warps, group;
    char variant[256];
} plan_report;

static int plan_info(lua_State *L)
{
    plan_report *r = lua_newuserdatauv(L, sizeof *r, 0);
    const spk_stack_plan *p = self_plan(L);
    r->family = spk_stack_plan_family(p);
    r->state = *spk_stack_plan_state(p);
    r->shape = spk_stack_plan_info(p)->shape;
    spk_stack_plan_fields(p, &r->kernel, &r->schedule);
    r->stages = spk_stack_plan_stages(p);
    spk_stack_plan_timeline_geometry(p, &r->blocks, &r->warps, &r->group);
    spk_stack_plan_variant_text(p, r->variant, sizeof r->variant);
    lua_createtable(L, 0, 12);
    lua_createtable(L, 0, r->kernel.count + 1);
    set_fields(L, &r->kernel);
    if (r->family)
        set_defines(L, r->family->options, r->state.bytes);
    lua_setfield(L, -2, "kernel");
    if (r->family) {
        lua_createtable(L, 0, r->schedule.count);
        set_fields(L, &r->schedule);
        lua_setfield(L, -2, "schedule");
    }
    if (r->stages) {
        lua_createtable(L, 0, 5);
        spk_lua_set_timeline_stages(L, r->stages);
        lua_pushinteger(L, (lua_Integer)r->blocks), lua_setfield(L, -2, "blocks");
        lua_pushinteger(L, r->warps), lua_setfield(L, -2, "warps");
        lua_pushinteger(L, r->group), lua_setfield(L, -2, "group");
        lua_setfield(L, -2, "timeline");
    }
    lua_pushstring(L, r->variant), lua_setfield(L, -2, "variant");
    set_shape(L, &r->shape);
    return 1;
}

static int plan_release(lua_State *L)
{
    spk_stack_plan_free(spk_lua_takeobject(L, 1, &spk_lua_plan_type));
    return 0;
}

static int plan_tostring(lua_State *L)
{
    const spk_stack_plan *p = spk_lua_toobject(L, 1, &spk_lua_plan_type);
    if (!p) {
        lua_pushliteral(L, "lstm stack plan (closed)");
        return 1;
    }
    char text[256];
    spk_stack_plan_name(p, text, sizeof text);
    lua_pushstring(L, text);
    return 1;
}

static const spk_lua_checked_reg plan_methods[] = {
    {"forward", plan_forward,
     "plan:forward(x[, {trace = t} | {timeline = selection}]) -> y[, ...]\n"
     "x f32 [batch, steps, in] on the host or the device; y [batch, steps, 2H] on x's side. With a trace\n"
     "(a kernel with a trace build): y, {h =, c =, layer =, direction =, steps =}. With a timeline selection\n"
     "(0-based, spk.timeline.selection's C form): through the timeline build recording it, y, stamps,\n"
     "columns, clock, build (spk.timeline.make reads them).",
     "x, options"},
    {"time", plan_time,
     "plan:time(x, rounds, warmup[, selection]) -> {ms, ...}\nCUDA-graph replays of one forward, each timed by "
     "events; with a timeline selection (0-based,\nspk.timeline.selection's C form) through the timeline build "
     "recording it.",
     "x, rounds, warmup, selection"},
    {"info", plan_info,
     "plan:info() -> {kernel =, schedule =, timeline =, variant =, layers =, ...}\nThe compiled variant, its "
     "resources, the schedule and what a timeline records.",
     ""},
    {NULL, NULL, NULL, NULL}};

spk_lua_type spk_lua_plan_type = {
    .metatable = "spk.lstm.plan",
    .name = "lstm stack plan",
    .methods = plan_methods,
    .release = plan_release,
    .tostring = plan_tostring,
    .doc = "lstm stack plan (C): the plan inside spk.lstm.stack's GPU kernel plans and spk.lstm.kernel_stack's\n"
           "(plan.handle).",
    .close_doc = "plan:close()\nFrees the plan's device memory now (also <close> and collection).",
};

/* ---- the families' functions ------------------------------------------------------ */

static const char *const plan_keys[] = {"backend", "layers", "batch", "steps", "math", "kernel",
                                        "schedule", "capacity", "timeout_ms", NULL};

static int l_plan_new(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    spk_lua_checkkeys(L, 1, plan_keys, "plan_new");
    lua_settop(L, 1);
    void **slot = spk_lua_newobject(L, &spk_lua_plan_type); /* 2; first: nothing allocates after the layers are read */
    spk_stack_plan_options o;
    memset(&o, 0, sizeof o);
    spk_lua_rawfield(L, 1, "backend");
    o.family = check_family(L, -1);
    lua_pop(L, 1);
    spk_lua_rawfield(L, 1, "kernel");
    read_kernel_choice(L, -1, o.family->options, &o.kernel);
    lua_pop(L, 1);
    spk_schedule schedule;
    if (spk_lua_rawfield(L, 1, "schedule") != LUA_TNIL) {
        read_schedule(L, -1, &schedule);
        o.schedule = &schedule;
    }
    lua_pop(L, 1);
    o.capacity = spk_lua_intfield(L, 1, "capacity", 0, 0, INT64_MAX, "stack");
    bool timeout = o.family->accepts & SPK_PLAN_TIMEOUT;
    o.timeout_ns = (uint64_t)spk_lua_intfield(L, 1, "timeout_ms", timeout ? 10000 : 0, 0, (lua_Integer)1 << 40,
                                              "stack") * 1000000u;
    spk_lstm_layer layers[SPK_LUA_PLAN_MAX_LAYERS];
    o.layers = layers;
    o.count = spk_lua_read_stack(L, layers, &o.batch, &o.steps, &o.math);
    if (!(*slot = spk_stack_plan_new(&o)))
        return spk_lua_fail(L);
    lua_pushvalue(L, 2);
    return 1;
}

static int l_kernel_families(lua_State *L)
{
    int n = 0;
    while (spk_families[n])
        n++;
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        const spk_family *f = spk_families[i];
        lua_createtable(L, 0, 9);
        lua_pushstring(L, f->backend), lua_setfield(L, -2, "backend");
        lua_pushstring(L, f->title), lua_setfield(L, -2, "title");
        lua_pushstring(L, f->summary), lua_setfield(L, -2, "summary");
        lua_pushstring(L, f->help), lua_setfield(L, -2, "help");
        push_option_table(L, f->options);
        lua_setfield(L, -2, "options");
        lua_pushboolean(L, (f->accepts & SPK_PLAN_SCHEDULE) != 0), lua_setfield(L, -2, "schedule");
        lua_pushboolean(L, (f->accepts & SPK_PLAN_CAPACITY) != 0), lua_setfield(L, -2, "capacity");
        lua_pushboolean(L, (f->accepts & SPK_PLAN_TIMEOUT) != 0), lua_setfield(L, -2, "timeout_ms");
        lua_pushboolean(L, (f->accepts & SPK_PLAN_TRACE) != 0), lua_setfield(L, -2, "trace");
        lua_pushboolean(L, f->stages != NULL), lua_setfield(L, -2, "timeline");
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* The variant a plan of `batch` compiles for the kernel table at idx. */
static void read_variant(lua_State *L, const spk_family *f, int idx, int64_t batch, lua_Integer hidden,
                         spk_family_state *st)
{
    if (batch < 1 || hidden < 1 || hidden > 1 << 20)
        luaL_error(L, "kernel_variant: batch and hidden must be positive");
    spk_kernel_choice choice;
    read_kernel_choice(L, idx, f->options, &choice);
    if (spk_family_variant(f, (int)hidden, batch, &choice, st) != 0)
        spk_lua_fail(L);
}

static int l_kernel_variant(lua_State *L)
{
    const spk_family *f = check_family(L, 1);
    lua_Integer batch = luaL_checkinteger(L, 3), hidden = luaL_optinteger(L, 4, 128);
    spk_family_state *st = lua_newuserdatauv(L, sizeof *st, 0);
    read_variant(L, f, 2, batch, hidden, st);
    spk_fields fields = {0};
    spk_fields_options(&fields, f->options, st->bytes);
    f->variant_fields(st, &fields);
    lua_createtable(L, 0, fields.count + 2);
    set_fields(L, &fields);
    set_defines(L, f->options, st->bytes);
    if (f->stages) { /* what its timeline build stamps */
        lua_createtable(L, 0, 2);
        spk_lua_set_timeline_stages(L, f->stages(st));
        lua_setfield(L, -2, "timeline");
    }
    return 1;
}

static int l_trace_check(lua_State *L)
{
    int64_t *steps = lua_newuserdatauv(L, sizeof *steps * SPK_LSTM_TRACE_MAX_STEPS, 0);
    spk_lstm_trace trace;
    spk_lua_read_trace(L, 1, &trace, steps);
    if (spk_lstm_trace_check(&trace, luaL_checkinteger(L, 2), luaL_checkinteger(L, 3)) != 0)
        return spk_lua_fail(L);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_persistent_schedule_fits(lua_State *L)
{
    spk_schedule s;
    read_schedule(L, 1, &s);
    lua_Integer cap = luaL_checkinteger(L, 3), conc = luaL_optinteger(L, 4, cap), hidden = luaL_optinteger(L, 5, 128);
    spk_family_state *st = lua_newuserdatauv(L, sizeof *st, 0);
    read_variant(L, &spk_persistent_kernels, 2, s.batch, hidden, st);
    /* a persistent state begins with its variant (family.h) */
    if (spk_persistent_schedule_fits(&s, (const spk_persistent_variant *)st->bytes, cap, conc) != 0)
        return spk_lua_fail(L);
    lua_pushboolean(L, 1);
    return 1;
}

static int read_list(lua_State *L, int idx, int64_t *out, int max, const char *what)
{
    luaL_checktype(L, idx, LUA_TTABLE);
    int n = spk_lua_rawcount(L, idx);
    if (n < 1 || n > max)
        return luaL_error(L, "%s must list 1 .. %d integers", what, max);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, idx, i + 1);
        int ok;
        out[i] = lua_tointegerx(L, -1, &ok);
        if (!ok)
            return luaL_error(L, "%s[%d] must be an integer", what, i + 1);
        lua_pop(L, 1);
    }
    return n;
}

static int l_cluster_schedule_pick(lua_State *L)
{
    lua_Integer batch = luaL_checkinteger(L, 1);
    int64_t heights[SPK_CLUSTER_MAX_HEIGHTS + 1], active[SPK_CLUSTER_MAX_HEIGHTS + 1];
    int n = read_list(L, 2, heights, SPK_CLUSTER_MAX_HEIGHTS + 1, "heights");
    if (read_list(L, 3, active, SPK_CLUSTER_MAX_HEIGHTS + 1, "max_active") != n)
        return luaL_error(L, "max_active must have one entry per height");
    spk_cluster_schedule s;
    if (spk_cluster_schedule_pick(&s, batch, heights, active, n, luaL_optinteger(L, 4, 0)) != 0)
        return spk_lua_fail(L);
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, s.batch), lua_setfield(L, -2, "batch");
    lua_pushinteger(L, s.tile_rows), lua_setfield(L, -2, "tile_rows");
    lua_pushinteger(L, s.tiles), lua_setfield(L, -2, "tiles");
    lua_pushinteger(L, s.clusters), lua_setfield(L, -2, "clusters");
    lua_pushinteger(L, s.max_active), lua_setfield(L, -2, "max_active_clusters");
    lua_pushinteger(L, s.waves), lua_setfield(L, -2, "waves");
    lua_pushinteger(L, 1), lua_setfield(L, -2, "launches"); /* per layer: both directions, every tile */
    return 1;
}

static const spk_lua_checked_reg functions[] = {
    {"plan_new", l_plan_new,
     "spk.core.plan_new{backend =, layers =, batch =, steps =, math =, kernel =, schedule =, capacity =,\n"
     "  timeout_ms =} -> plan\nThe plan of a built-in kernel family (what spk.lstm.stack{backend = ...} builds).",
     "options"},
    {"kernel_families", l_kernel_families,
     "spk.core.kernel_families() -> {{backend =, title =, summary =, options =, schedule =, capacity =,\n"
     "  timeout_ms =, trace =, timeline =}, ...}\nThe built-in kernel families, their option tables and the plan "
     "options they take.",
     ""},
    {"kernel_variant", l_kernel_variant,
     "spk.core.kernel_variant(backend, kernel, batch[, hidden = 128]) -> variant\n"
     "The variant a plan of that batch compiles (options left out: the batch's default), its sizes and\n"
     "defines; what spk.lstm.kernel_variant calls. No device needed.",
     "backend, kernel, batch, hidden"},
    {"trace_check", l_trace_check,
     "spk.core.trace_check(trace, layers, steps) -> true\nThe error a traced forward would give, or true.",
     "trace, layers, steps"},
    {"persistent_schedule_fits", l_persistent_schedule_fits,
     "spk.core.persistent_schedule_fits(schedule, kernel, capacity[, concurrent[, hidden = 128]]) -> true\n"
     "Whether a schedule's launches fit the device's co-resident blocks, or an error saying why.",
     "schedule, kernel, capacity, concurrent, hidden"},
    {"cluster_schedule_pick", l_cluster_schedule_pick,
     "spk.core.cluster_schedule_pick(batch, heights, max_active[, tile_rows]) -> schedule\n"
     "The tile height and waves the cluster plan picks, given each height's co-resident clusters.",
     "batch, heights, max_active, tile_rows"},
    {NULL, NULL, NULL, NULL},
};

void spk_open_plan(lua_State *L, int module)
{
    spk_lua_newtype(L, &spk_lua_plan_type);
    lua_pushvalue(L, module);
    spk_lua_setfuncs_module(L, functions, "spk.core");
    lua_pop(L, 1);
}
