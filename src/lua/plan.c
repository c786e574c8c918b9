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
 *   core.kernel_stack_new{...} -> plan, core.kernel_stack_set_timeline, core.kernel_stack_check,
 *                   core.kernel_stack_contract: a kernel of one's own (the section below)
 * Argument tables are read raw and the tensors' pointers taken after the last
 * allocation (lua/bind.h). */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "lstm/cluster.h"
#include "lstm/device_layers.h"
#include "lstm/kernel_stack.h"
#include "lstm/persistent.h"
#include "lstm/stack_plan.h"
#include "lua/areas.h"
#include "lua/cuda_area.h"
#include "lua/timeline.h"

/* The one userdata of both constructors, core.plan_new (a built-in kernel
 * family) and core.kernel_stack_new (a kernel of one's own, below). */
static spk_lua_type plan_type; /* below */

/* ---- reading a plan's options ---------------------------------------------- */

/* opts.math: one of the stacks' maths (cuda/math_modes.h, SPK_MATH_STACKS),
 * with the stacks' message for any other value. */
static spk_math_mode read_stack_math(lua_State *L)
{
    spk_math_mode math = SPK_MATH_FP32;
    spk_lua_rawfield(L, 1, "math");
    bool named = lua_type(L, -1) == LUA_TSTRING && spk_math_mode_from_name(lua_tostring(L, -1), &math) == 0;
    if (!lua_isnil(L, -1) && !named) {
        char choices[128];
        spk_math_mode_choices(SPK_MATH_STACKS, choices, sizeof choices);
        if (lua_type(L, -1) == LUA_TSTRING)
            luaL_error(L, "lstm stack: math must be %s (the input projections), got \"%s\"", choices,
                       lua_tostring(L, -1));
        luaL_error(L, "lstm stack: math must be %s (the input projections), got %s", choices, spk_lua_describe(L, -1));
    }
    lua_pop(L, 1);
    if (spk_lstm_check_math(math) != 0)
        spk_lua_fail(L);
    return math;
}

/* What every plan constructor reads first, in this order, from the table at
 * argument 1: layers, a list of {W =, R =, B =} (the list stays on the Lua
 * stack, so its tensors stay referenced for the call), batch and steps
 * ("stack.batch must be an integer, ..."), math (SPK_MATH_STACKS; nil:
 * fp32). Read raw; the layers' pointers stay valid while nothing allocates,
 * so the plan's object is pushed before this is called. */
#define MAX_LAYERS 64
static int read_stack(lua_State *L, spk_lstm_layer *layers, int64_t *batch, int64_t *steps, spk_math_mode *math)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    spk_lua_rawfield(L, 1, "layers"); /* stays on the stack: it keeps the tensors alive */
    int count = spk_lua_checklayers(L, -1, layers, MAX_LAYERS, "lstm stack");
    *batch = spk_lua_intfield(L, 1, "batch", 0, INT64_MIN, INT64_MAX, "stack");
    *steps = spk_lua_intfield(L, 1, "steps", 0, INT64_MIN, INT64_MAX, "stack");
    *math = read_stack_math(L);
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

/* t.defines = {MACRO = "value", ...}: every define of a family's variant, on the table at the top. */
static void set_defines(lua_State *L, const spk_family *f, const spk_family_state *st)
{
    spk_define defines[SPK_FAMILY_DEFINES];
    char text[SPK_FAMILY_DEFINES][16];
    int count = spk_family_defines(f, st, defines, text);
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
    spk_lua_setstring(L, "backend", f->backend);
    lua_createtable(L, f->count, 0);
    for (int i = 0; i < f->count; i++) {
        const spk_kernel_option *o = &f->options[i];
        lua_createtable(L, 0, 8);
        spk_lua_setstring(L, "name", o->name);
        if (o->macro)
            spk_lua_setstring(L, "macro", o->macro);
        if (o->words[0]) {
            lua_createtable(L, SPK_OPTION_WORDS, 0);
            for (int w = 0; w < SPK_OPTION_WORDS && o->words[w]; w++)
                lua_pushstring(L, o->words[w]), lua_rawseti(L, -2, w + 1);
            lua_setfield(L, -2, "words");
        } else {
            spk_lua_setint(L, "min", o->min);
            spk_lua_setint(L, "max", o->max);
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
        spk_lua_setstring(L, "takes", values);
        spk_lua_setstring(L, "default", defaults[o->from]);
        spk_lua_setstring(L, "help", o->help);
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
    spk_lua_setint(L, "layers", shape->layers);
    spk_lua_setint(L, "hidden", shape->hidden);
    spk_lua_setint(L, "input", shape->input);
    spk_lua_setint(L, "batch", shape->batch);
    spk_lua_setint(L, "steps", shape->steps);
    spk_lua_setstring(L, "math", spk_lstm_math_name(shape->math));
}

/* ---- the plan userdata ---------------------------------------------------------- */

static spk_stack_plan *self_plan(lua_State *L) { return spk_lua_checkobject(L, 1, &plan_type); }

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
    spk_lua_setfields(L, &build);
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
    spk_lua_setfields(L, &r->kernel);
    if (r->family)
        set_defines(L, r->family, &r->state);
    lua_setfield(L, -2, "kernel");
    if (r->family) {
        lua_createtable(L, 0, r->schedule.count);
        spk_lua_setfields(L, &r->schedule);
        lua_setfield(L, -2, "schedule");
    }
    if (r->stages) {
        lua_createtable(L, 0, 5);
        spk_lua_set_timeline_stages(L, r->stages);
        spk_lua_setint(L, "blocks", (lua_Integer)r->blocks);
        spk_lua_setint(L, "warps", r->warps);
        spk_lua_setint(L, "group", r->group);
        lua_setfield(L, -2, "timeline");
    }
    spk_lua_setstring(L, "variant", r->variant);
    set_shape(L, &r->shape);
    return 1;
}

static void plan_tostring(lua_State *L, void *p)
{
    char text[256];
    spk_stack_plan_name(p, text, sizeof text);
    lua_pushstring(L, text);
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

static void plan_free(void *p) { spk_stack_plan_free(p); }

static spk_lua_type plan_type = {.metatable = "spk.lstm.plan", .name = "lstm stack plan",
    .methods = plan_methods, .free = plan_free, .tostring = plan_tostring,
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
    void **slot = spk_lua_newobject(L, &plan_type); /* 2; first: nothing allocates after the layers are read */
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
    spk_lstm_layer layers[MAX_LAYERS];
    o.layers = layers;
    o.count = read_stack(L, layers, &o.batch, &o.steps, &o.math);
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
        spk_lua_setstring(L, "backend", f->backend);
        spk_lua_setstring(L, "title", f->title);
        spk_lua_setstring(L, "summary", f->summary);
        spk_lua_setstring(L, "help", f->help);
        push_option_table(L, f->options);
        lua_setfield(L, -2, "options");
        spk_lua_setbool(L, "schedule", (f->accepts & SPK_PLAN_SCHEDULE) != 0);
        spk_lua_setbool(L, "capacity", (f->accepts & SPK_PLAN_CAPACITY) != 0);
        spk_lua_setbool(L, "timeout_ms", (f->accepts & SPK_PLAN_TIMEOUT) != 0);
        spk_lua_setbool(L, "trace", (f->accepts & SPK_PLAN_TRACE) != 0);
        spk_lua_setbool(L, "timeline", f->stages != NULL);
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
    spk_lua_setfields(L, &fields);
    set_defines(L, f, st);
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

static int l_cluster_schedule_pick(lua_State *L)
{
    lua_Integer batch = luaL_checkinteger(L, 1);
    int64_t heights[SPK_CLUSTER_MAX_HEIGHTS + 1], active[SPK_CLUSTER_MAX_HEIGHTS + 1];
    int n = spk_lua_checkintegers(L, 2, heights, 1, SPK_CLUSTER_MAX_HEIGHTS + 1, "heights");
    if (spk_lua_checkintegers(L, 3, active, 1, SPK_CLUSTER_MAX_HEIGHTS + 1, "max_active") != n)
        return luaL_error(L, "max_active must have one entry per height");
    spk_cluster_schedule s;
    if (spk_cluster_schedule_pick(&s, batch, heights, active, n, luaL_optinteger(L, 4, 0)) != 0)
        return spk_lua_fail(L);
    spk_fields f = {0};
    spk_cluster_schedule_fields(&s, &f);
    lua_createtable(L, 0, f.count);
    spk_lua_setfields(L, &f);
    return 1;
}

/* ---- a kernel of one's own (lstm/kernel_stack.h) -------------------------------
 * core.kernel_stack_new{layers =, batch =, steps =, math =, module =, entry =, <description>} -> plan
 * core.kernel_stack_check(<description>[, params]) -> true: the description's checks, and with
 *                 params (module:params(entry) of the kernel's PTX) the parameters against args
 * core.kernel_stack_contract() -> {{name =, c_type =, kind =, meaning =, both =}, ...}
 * The description: name, args = {"gates", ...}, launches = {{direction = "forward" | "reverse" | "both",
 * grid =, block =, cluster =, smem =, cooperative =, co_resident =, first_tile =}, ...}, concurrent,
 * tile_rows, state_words, timeout_ms, watchdog_ms, packing = {order =, layout =}, statuses =
 * {[code] = message}, check_writes, timeline = {stages = {...}, waits_for = {stage = stage}}. Tables are read raw; the layers' tensors and the module are taken
 * after the last allocation. The friendly API, the launch rule and the kernel files are
 * lua/spk/kernel_stack.lua's. */

#define MAX_LAUNCHES 64
#define MAX_STATUSES 32

/* A description read from Lua, with its storage; strings stay referenced by
 * the holder table at `holder`. */
typedef struct read_desc {
    spk_kernel_stack_desc desc;
    int args[SPK_KERNEL_STACK_MAX_ARGS];
    spk_kernel_stack_launch launches[MAX_LAUNCHES];
    spk_kernel_stack_status statuses[MAX_STATUSES];
    /* timeline = {stages =, waits_for =}: what the timeline build stamps (count 0: none) */
    spk_timeline_stages stages;
    const char *stage_names[SPK_TIMELINE_MAX_STAGES];
    int waits_for[SPK_TIMELINE_MAX_STAGES];
} read_desc;

static const char *const desc_keys[] = {"name", "args", "launches", "concurrent", "tile_rows", "state_words",
                                        "timeout_ms", "watchdog_ms", "packing", "statuses", "check_writes",
                                        "timeline", NULL};

/* A string field, kept alive in the holder table; NULL when nil. */
static const char *held_string(lua_State *L, int t, const char *key, int holder, const char *where)
{
    int type = spk_lua_rawfield(L, t, key);
    if (type == LUA_TNIL) {
        lua_pop(L, 1);
        return NULL;
    }
    if (type != LUA_TSTRING)
        luaL_error(L, "%s.%s must be a string, got %s", where, key, luaL_typename(L, -1));
    const char *v = lua_tostring(L, -1);
    lua_rawseti(L, holder, spk_lua_rawcount(L, holder) + 1);
    return v;
}

static void read_args(lua_State *L, int t, read_desc *r)
{
    if (spk_lua_rawfield(L, t, "args") != LUA_TTABLE)
        luaL_error(L, "kernel.args must be a list of the contract's argument names, got %s", luaL_typename(L, -1));
    int n = spk_lua_rawcount(L, -1);
    if (n > SPK_KERNEL_STACK_MAX_ARGS)
        luaL_error(L, "kernel.args names %d arguments, at most %d", n, SPK_KERNEL_STACK_MAX_ARGS);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, -1, i + 1);
        int a = lua_type(L, -1) == LUA_TSTRING ? spk_recurrence_arg_find(lua_tostring(L, -1))
                                                : spk_fail("kernel.args[%d] must be a string, got a %s", i + 1,
                                                           luaL_typename(L, -1));
        if (a < 0) {
            spk_error_prefix("kernel.args[%d]", i + 1);
            spk_lua_fail(L);
        }
        r->args[i] = a;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    r->desc.args = r->args;
    r->desc.nargs = n;
}

static const char *const launch_keys[] = {"direction", "grid",        "block",      "cluster", "smem",
                                          "cooperative", "co_resident", "first_tile", NULL};

static void read_launches(lua_State *L, int t, read_desc *r)
{
    if (spk_lua_rawfield(L, t, "launches") != LUA_TTABLE)
        luaL_error(L, "kernel.launches must be a list of launches, got %s", luaL_typename(L, -1));
    int list = lua_gettop(L), n = spk_lua_rawcount(L, list);
    if (n < 1 || n > MAX_LAUNCHES)
        luaL_error(L, "kernel.launches must hold 1 .. %d launches, got %d", MAX_LAUNCHES, n);
    for (int i = 0; i < n; i++) {
        char where[32];
        snprintf(where, sizeof where, "launches[%d]", i + 1);
        if (lua_rawgeti(L, list, i + 1) != LUA_TTABLE)
            luaL_error(L, "kernel.%s must be a table, got %s", where, luaL_typename(L, -1));
        int l = lua_gettop(L);
        spk_lua_checkkeys(L, l, launch_keys, where);
        spk_kernel_stack_launch *o = &r->launches[i];
        memset(o, 0, sizeof *o);
        int type = spk_lua_rawfield(L, l, "direction");
        const char *d = type == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        if (d && strcmp(d, "forward") == 0)
            o->direction = 0;
        else if (d && strcmp(d, "reverse") == 0)
            o->direction = 1;
        else if (type == LUA_TNIL || (d && strcmp(d, "both") == 0))
            o->direction = -1;
        else
            luaL_error(L, "%s.direction must be \"forward\", \"reverse\" or \"both\", got %s", where,
                       spk_lua_describe(L, -1));
        lua_pop(L, 1);
        spk_lua_dim3field(L, l, "grid", o->grid, 0, where);
        spk_lua_dim3field(L, l, "block", o->block, 0, where);
        if (!o->grid[0] || !o->block[0])
            luaL_error(L, "%s needs grid = and block =", where);
        spk_lua_dim3field(L, l, "cluster", o->cluster, 0, where);
        o->smem = (size_t)spk_lua_intfield(L, l, "smem", 0, 0, 1 << 30, where);
        o->cooperative = spk_lua_boolfield(L, l, "cooperative", where);
        o->co_resident = spk_lua_boolfield(L, l, "co_resident", where);
        o->first_tile = (int32_t)spk_lua_intfield(L, l, "first_tile", 0, 0, INT32_MAX, where);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    r->desc.launches = r->launches;
    r->desc.nlaunches = n;
}

static void read_statuses(lua_State *L, int t, read_desc *r, int holder)
{
    int type = spk_lua_rawfield(L, t, "statuses");
    int n = 0;
    if (type == LUA_TTABLE) {
        int s = lua_gettop(L);
        lua_pushnil(L);
        while (lua_next(L, s)) { /* raw */
            int isint = 0;
            lua_Integer code = lua_tointegerx(L, -2, &isint);
            if (lua_type(L, -2) != LUA_TNUMBER || !isint || code < 1 || code > 0xffffffffll)
                luaL_error(L, "kernel.statuses maps status codes (integers >= 1) to messages, got the key %s",
                           spk_lua_describe(L, -2));
            if (lua_type(L, -1) != LUA_TSTRING)
                luaL_error(L, "kernel.statuses[%I] must be a message, got %s", code, luaL_typename(L, -1));
            if (n >= MAX_STATUSES)
                luaL_error(L, "kernel.statuses holds more than %d codes", MAX_STATUSES);
            r->statuses[n].code = (unsigned)code;
            r->statuses[n].message = lua_tostring(L, -1);
            lua_pushvalue(L, -1);
            lua_rawseti(L, holder, spk_lua_rawcount(L, holder) + 1);
            n++;
            lua_pop(L, 1);
        }
    } else if (type != LUA_TNIL) {
        luaL_error(L, "kernel.statuses must be a table {[code] = message}, got %s", luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    r->desc.statuses = r->statuses;
    r->desc.nstatuses = n;
}

static void read_packing(lua_State *L, int t, read_desc *r, int holder)
{
    r->desc.packing = spk_lstm_packing_builtin();
    int type = spk_lua_rawfield(L, t, "packing");
    if (type == LUA_TTABLE) {
        int p = lua_gettop(L);
        static const char *const keys[] = {"order", "layout", NULL};
        spk_lua_checkkeys(L, p, keys, "packing");
        const char *order = held_string(L, p, "order", holder, "packing");
        const char *layout = held_string(L, p, "layout", holder, "packing");
        if (order) {
            if (spk_lstm_gate_order_check(order) != 0) {
                spk_error_prefix("packing.order");
                spk_lua_fail(L);
            }
            memcpy(r->desc.packing.order, order, 5);
        }
        if (layout && spk_lstm_layout_from_name(layout, &r->desc.packing.layout) != 0) {
            spk_error_prefix("packing.layout");
            spk_lua_fail(L);
        }
    } else if (type != LUA_TNIL) {
        luaL_error(L, "kernel.packing must be a table {order =, layout =}, got %s", luaL_typename(L, -1));
    }
    lua_pop(L, 1);
}

/* The stage of timeline.stages named by the string at idx, or -1. */
static int stage_index(lua_State *L, int idx, const read_desc *r)
{
    if (lua_type(L, idx) != LUA_TSTRING)
        return -1;
    for (int k = 0; k < r->stages.count; k++)
        if (strcmp(lua_tostring(L, idx), r->stage_names[k]) == 0)
            return k;
    return -1;
}

/* A Lua error about an entry of timeline.waits_for (`key`: the stage that
 * waits, or NULL for a key that is none) whose value at idx is no stage. */
static void waits_for_error(lua_State *L, const read_desc *r, const char *key, int idx)
{
    idx = lua_absindex(L, idx);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int k = 0; k < r->stages.count; k++) {
        if (k)
            luaL_addstring(&b, ", ");
        luaL_addstring(&b, r->stage_names[k]);
    }
    luaL_pushresult(&b);
    const char *value = lua_type(L, idx) == LUA_TSTRING ? lua_pushfstring(L, "\"%s\"", lua_tostring(L, idx))
                                                        : spk_lua_describe(L, idx);
    luaL_error(L, "timeline.waits_for%s%s: %s is not one of timeline.stages (%s)", key ? "." : "", key ? key : "",
               value, lua_tostring(L, -2));
}

/* timeline = {stages = {"dot", "cell"}, waits_for = {wait = "publish"}}: the
 * stages a step of the timeline build runs, in order, and for a stage that
 * waits for every block's end of another at the previous step, that stage
 * (the representation plan:info().timeline reports). */
static void read_timeline(lua_State *L, int t, read_desc *r, int holder)
{
    int type = spk_lua_rawfield(L, t, "timeline");
    if (type == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    if (type != LUA_TTABLE)
        luaL_error(L, "timeline must be a table {stages = {\"dot\", ...}, waits_for = {...}}, got %s",
                   spk_lua_describe(L, -1));
    int tl = lua_gettop(L);
    static const char *const keys[] = {"stages", "waits_for", NULL};
    spk_lua_checkkeys(L, tl, keys, "timeline");
    if (spk_lua_rawfield(L, tl, "stages") != LUA_TTABLE)
        luaL_error(L, "timeline.stages must be a list of the stages' names, in the order a step runs them, "
                      "got %s",
                   spk_lua_describe(L, -1));
    int list = lua_gettop(L), n = spk_lua_rawcount(L, list);
    if (n < 1 || n > SPK_TIMELINE_MAX_STAGES)
        luaL_error(L, "timeline.stages: a step has 1 to %d stages, got %d names", SPK_TIMELINE_MAX_STAGES, n);
    for (int k = 0; k < n; k++) {
        if (lua_rawgeti(L, list, k + 1) != LUA_TSTRING)
            luaL_error(L, "timeline.stages[%d] must be a string, got %s", k + 1, spk_lua_describe(L, -1));
        r->stage_names[k] = lua_tostring(L, -1);
        lua_rawseti(L, holder, spk_lua_rawcount(L, holder) + 1);
        r->waits_for[k] = -1;
    }
    lua_pop(L, 1);
    r->stages = (spk_timeline_stages){n, r->stage_names, r->waits_for};
    type = spk_lua_rawfield(L, tl, "waits_for");
    if (type == LUA_TTABLE) {
        int w = lua_gettop(L);
        lua_pushnil(L);
        while (lua_next(L, w)) { /* raw */
            int stage = stage_index(L, -2, r), target = stage_index(L, -1, r);
            if (stage < 0)
                waits_for_error(L, r, NULL, -2);
            if (target < 0)
                waits_for_error(L, r, r->stage_names[stage], -1);
            r->waits_for[stage] = target;
            lua_pop(L, 1);
        }
    } else if (type != LUA_TNIL) {
        luaL_error(L, "timeline.waits_for must map a stage to the stage it waits for at the previous step "
                      "({wait = \"publish\"}), got %s",
                   spk_lua_describe(L, -1));
    }
    lua_pop(L, 2);
    if (spk_timeline_stages_check(&r->stages) != 0)
        spk_lua_fail(L);
}

/* Reads the description at t into r (strings held by `holder`) and checks it. */
static void read_description(lua_State *L, int t, read_desc *r, int holder)
{
    memset(r, 0, sizeof *r);
    r->desc.name = held_string(L, t, "name", holder, "kernel");
    read_args(L, t, r);
    read_launches(L, t, r);
    read_statuses(L, t, r, holder);
    read_packing(L, t, r, holder);
    read_timeline(L, t, r, holder);
    r->desc.concurrent = spk_lua_boolfield(L, t, "concurrent", "kernel");
    r->desc.check_writes = spk_lua_boolfield(L, t, "check_writes", "kernel");
    r->desc.tile_rows = (int32_t)spk_lua_intfield(L, t, "tile_rows", 0, 0, INT32_MAX, "kernel");
    r->desc.state_words = (int64_t)spk_lua_intfield(L, t, "state_words", 0, 0, (lua_Integer)1 << 40, "kernel");
    r->desc.timeout_ns = (uint64_t)spk_lua_intfield(L, t, "timeout_ms", 10000, 0, (lua_Integer)1 << 40, "kernel") * 1000000u;
    r->desc.watchdog_ns = (uint64_t)spk_lua_intfield(L, t, "watchdog_ms", 0, 0, (lua_Integer)1 << 40, "kernel") * 1000000u;
    if (spk_kernel_stack_desc_check(&r->desc) != 0)
        spk_lua_fail(L);
}

/* ---- the plan ---------------------------------------------------------------- */

static const char *const new_keys[] = {"layers", "batch", "steps", "math", "module", "entry", "name", "args",
                                       "launches", "concurrent", "tile_rows", "state_words", "timeout_ms",
                                       "watchdog_ms", "packing", "statuses", "check_writes", "timeline", NULL};

static int l_stack_new(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    spk_lua_checkkeys(L, 1, new_keys, "kernel_stack_new");
    lua_settop(L, 1);
    void **slot = spk_lua_newobject(L, &plan_type); /* 2; first: nothing allocates after the layers are read */
    lua_newtable(L);                                         /* 3: the holder */
    read_desc *r = lua_newuserdatauv(L, sizeof *r, 0);      /* 4 */
    read_description(L, 1, r, 3);
    spk_kernel_stack_options o;
    memset(&o, 0, sizeof o);
    o.desc = &r->desc;
    o.entry = held_string(L, 1, "entry", 3, "kernel");
    if (!o.entry)
        return luaL_error(L, "kernel_stack_new: entry (the kernel's name) is missing");
    if (spk_lua_rawfield(L, 1, "module") == LUA_TNIL)
        return luaL_error(L, "kernel_stack_new: module (spk.cuda.compile's) is missing");
    int module = lua_gettop(L); /* stays on the stack */
    spk_lstm_layer layers[MAX_LAYERS];
    o.layers = layers;
    o.count = read_stack(L, layers, &o.batch, &o.steps, &o.math);
    o.module = spk_lua_checkobject(L, module, &spk_lua_module_type); /* after the last allocation */
    if (!(*slot = spk_stack_plan_of_kernel(&o, r->stages.count ? &r->stages : NULL)))
        return spk_lua_fail(L);
    lua_pushvalue(L, 2);
    return 1;
}

/* core.kernel_stack_set_timeline(plan, module, entry): the timeline build, checked and held. */
static int l_set_timeline(lua_State *L)
{
    const char *entry = luaL_checkstring(L, 3);
    spk_module *m = spk_lua_checkobject(L, 2, &spk_lua_module_type);
    if (spk_stack_plan_set_timeline_build(self_plan(L), m, entry) != 0)
        return spk_lua_fail(L);
    return 0;
}

/* ---- checks without a device ----------------------------------------------- */

static int l_check(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    spk_lua_checkkeys(L, 1, desc_keys, "kernel_stack_check");
    lua_settop(L, 2);
    lua_newtable(L);                                    /* 3: the holder */
    read_desc *r = lua_newuserdatauv(L, sizeof *r, 0); /* 4 */
    read_description(L, 1, r, 3);
    if (lua_isnil(L, 2)) {
        lua_pushboolean(L, 1);
        return 1;
    }
    luaL_checktype(L, 2, LUA_TTABLE);
    int n = spk_lua_rawcount(L, 2);
    if (n > SPK_PTX_MAX_PARAMS)
        return luaL_error(L, "params: more than %d parameters", SPK_PTX_MAX_PARAMS);
    spk_ptx_param *params = lua_newuserdatauv(L, sizeof *params * (size_t)(n ? n : 1), 0);
    for (int i = 0; i < n; i++) {
        if (lua_rawgeti(L, 2, i + 1) != LUA_TTABLE)
            return luaL_error(L, "params[%d] must be a table {type =, size =, elements =}", i + 1);
        int p = lua_gettop(L);
        memset(&params[i], 0, sizeof params[i]);
        if (spk_lua_rawfield(L, p, "type") != LUA_TSTRING)
            return luaL_error(L, "params[%d].type must be a PTX type name", i + 1);
        snprintf(params[i].type, sizeof params[i].type, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        params[i].size = (size_t)spk_lua_intfield(L, p, "size", 0, 0, 1 << 20, "params");
        params[i].elements = (int)spk_lua_intfield(L, p, "elements", 1, 1, 1 << 20, "params");
        lua_pop(L, 1);
    }
    if (spk_recurrence_check_params(r->desc.name ? r->desc.name : "?", r->desc.args, r->desc.nargs, params, n) != 0)
        return spk_lua_fail(L);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_contract(lua_State *L)
{
    lua_createtable(L, SPK_RA_COUNT, 0);
    for (int i = 0; i < SPK_RA_COUNT; i++) {
        const spk_recurrence_arg_info *a = &spk_recurrence_args[i];
        lua_createtable(L, 0, 5);
        spk_lua_setstring(L, "name", a->name);
        spk_lua_setstring(L, "kind", spk_arg_kind_name(a->kind));
        spk_lua_setstring(L, "c_type", a->c_type);
        spk_lua_setstring(L, "meaning", a->meaning);
        spk_lua_setstring(L, "both", a->both ? a->both : a->meaning);
        lua_rawseti(L, -2, i + 1);
    }
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
    {"kernel_stack_new", l_stack_new,
     "spk.core.kernel_stack_new{layers =, batch =, steps =, math =, module =, entry =, args =, launches =, ...}\n"
     "  -> plan\nThe stack around a recurrence kernel (what spk.lstm.kernel_stack builds).",
     "options"},
    {"kernel_stack_set_timeline", l_set_timeline,
     "spk.core.kernel_stack_set_timeline(plan, module, entry)\n"
     "The timeline build (SPK_TIMELINE=1) of a kernel_stack_new plan whose description names timeline\n"
     "stages: checked against the plan's parameters and the recording's seven, held for timeline forwards.",
     "plan, module, entry"},
    {"kernel_stack_check", l_check,
     "spk.core.kernel_stack_check(description[, params]) -> true\n"
     "The checks of a kernel stack's description and, given module:params(entry) of the kernel's PTX, of\n"
     "its parameters against the argument list; an error naming what is wrong. No device needed.",
     "description, params"},
    {"kernel_stack_contract", l_contract,
     "spk.core.kernel_stack_contract() -> {{name =, kind =, c_type =, meaning =, both =}, ...}\n"
     "The recurrence-kernel contract's arguments, in the order of docs/kernels.md.",
     ""},
    {NULL, NULL, NULL, NULL},
};

void spk_open_plan(lua_State *L, int module)
{
    spk_lua_newtype(L, &plan_type);
    spk_lua_register(L, module, functions, "spk.core");
}
