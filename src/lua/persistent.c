/* Bindings of the persistent GPU stack (lstm/persistent.h): thin, the options
 * and their defaults are spk_persistent_family's.
 *   core.persistent_stack_new{layers =, batch =, steps =, kernel = {...}, schedule = {...},
 *                  capacity =, timeout_ms =, math = "fp32" | "tf32"}  -> plan userdata
 *   plan:forward(x[, {trace = {layer =, direction =, steps =}}]) -> tensor on x's device
 *                   (with a trace: y, {trace = {h =, c =, layer =, direction =, steps =}})
 *   plan:forward(x, {timeline = selection}) -> y, stamps, columns, clock, build: the timeline build
 *                   recording the selection (0-based, as lua/timeline.h reads it); build =
 *                   {registers =, spills =, capacity =} of that build
 *   plan:time(x, rounds, warmup[, selection]) -> {ms, ...}
 *   plan:info() -> table (kernel attributes, schedule, capacities, and timeline = {stages =,
 *                   waits_for =, blocks =, warps =, group =}: what a timeline records)
 *   plan:close()
 *   core.persistent_variant(kernel_table | nil, batch[, hidden]) -> the variant a plan of that batch
 *                   compiles (options left out: each option's default rule) and its geometry
 *   core.persistent_options() -> the option table as data (lstm/kernel_options.h)
 *   core.persistent_schedule_fits(schedule, kernel_table, capacity[, concurrent[, hidden]]) -> true
 *   core.persistent_trace_check(trace_table, layers, steps) -> true, or the error a traced forward gives
 * Layers are a list of tables {W =, R =, B =} of host tensors. Argument
 * tables are read raw and the tensors' pointers taken after the last
 * allocation (lua/bind.h); extra arguments are errors. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "lstm/device_layers.h"
#include "lstm/persistent.h"
#include "lua/bind.h"
#include "lua/gpu_plan.h"
#include "lua/timeline.h"

static void push_variant(lua_State *L, const spk_persistent_variant *v, const spk_persistent_geometry *g)
{
    lua_createtable(L, 0, 12);
    spk_lua_set_kernel_options(L, &spk_persistent_family, v);
    lua_pushinteger(L, g->groups), lua_setfield(L, -2, "groups");
    lua_pushinteger(L, g->chunks), lua_setfield(L, -2, "chunks");
    lua_pushinteger(L, g->state_tile), lua_setfield(L, -2, "state_tile");
    lua_pushinteger(L, (lua_Integer)g->smem_bytes), lua_setfield(L, -2, "smem_bytes");
}

/* The variant a plan of `batch` compiles for the kernel table at idx. */
static void read_variant(lua_State *L, int idx, int64_t batch, int hidden, spk_persistent_variant *v)
{
    spk_kernel_choice choice;
    spk_lua_read_kernel_choice(L, idx, &spk_persistent_family, &choice);
    if (spk_persistent_variant_resolve(hidden, batch, &choice, v) != 0)
        spk_lua_fail(L);
}

static int l_variant(lua_State *L)
{
    spk_lua_noextra(L, 3);
    lua_Integer batch = luaL_checkinteger(L, 2), hidden = luaL_optinteger(L, 3, 128);
    if (batch < 1 || hidden < 1 || hidden > 1 << 20)
        return luaL_error(L, "persistent_variant: batch and hidden must be positive");
    spk_persistent_variant v;
    read_variant(L, 1, batch, (int)hidden, &v);
    spk_persistent_geometry g;
    if (spk_persistent_variant_check(&v, &g) != 0)
        return spk_lua_fail(L);
    push_variant(L, &v, &g);
    lua_pushstring(L, "lstm_recurrence.cu"), lua_setfield(L, -2, "file");
    return 1;
}

static int l_options(lua_State *L)
{
    spk_lua_noextra(L, 0);
    spk_lua_push_kernel_family(L, &spk_persistent_family);
    return 1;
}

static void read_schedule(lua_State *L, int idx, spk_schedule *s)
{
    luaL_checktype(L, idx, LUA_TTABLE);
    int t = lua_absindex(L, idx);
    memset(s, 0, sizeof *s);
    s->batch = spk_lua_int_field(L, t, "batch", 0, "schedule");
    s->groups = spk_lua_int_field(L, t, "groups", 0, "schedule");
    s->tile_rows = spk_lua_int_field(L, t, "tile_rows", 0, "schedule");
    s->tiles = spk_lua_int_field(L, t, "tiles", 0, "schedule");
    s->tiles_per_launch = spk_lua_int_field(L, t, "tiles_per_launch", s->tiles, "schedule");
    spk_lua_rawfield(L, t, "concurrent");
    s->concurrent = lua_toboolean(L, -1);
    lua_pop(L, 1);
}

static void push_schedule(lua_State *L, const spk_schedule *s)
{
    lua_createtable(L, 0, 8);
    lua_pushinteger(L, s->batch), lua_setfield(L, -2, "batch");
    lua_pushinteger(L, s->groups), lua_setfield(L, -2, "groups");
    lua_pushinteger(L, s->tile_rows), lua_setfield(L, -2, "tile_rows");
    lua_pushinteger(L, s->tiles), lua_setfield(L, -2, "tiles");
    lua_pushinteger(L, s->tiles_per_launch), lua_setfield(L, -2, "tiles_per_launch");
    lua_pushboolean(L, s->concurrent), lua_setfield(L, -2, "concurrent");
    int64_t n = spk_schedule_launch_count(s);
    lua_createtable(L, (int)(n > 0 ? n : 0), 0);
    for (int64_t i = 0; i < n; i++) {
        int64_t first, count;
        if (spk_schedule_launch(s, i, &first, &count) != 0)
            break;
        lua_createtable(L, 2, 0);
        lua_pushinteger(L, first), lua_rawseti(L, -2, 1);
        lua_pushinteger(L, count), lua_rawseti(L, -2, 2);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "launches");
}

static void plan_free(void *plan) { spk_persistent_plan_free(plan); }

static int plan_time(void *plan, const spk_tensor *x, int rounds, int warmup, double *ms)
{
    return spk_persistent_plan_time(plan, x, rounds, warmup, ms);
}

static int plan_time_timeline(void *plan, const spk_tensor *x, const spk_timeline_selection *sel, int rounds,
                              int warmup, double *ms)
{
    return spk_persistent_plan_time_timeline(plan, x, sel, rounds, warmup, ms);
}

static void plan_push_name(lua_State *L, const void *plan)
{
    const spk_persistent_plan_info *i = spk_persistent_plan_get_info(plan);
    lua_pushfstring(L, "lstm stack (persistent, %d layers, batch %d, steps %d, tile_rows %d, %s%s)",
                    (int)i->shape.layers, (int)i->shape.batch, (int)i->shape.steps, (int)i->schedule.tile_rows,
                    i->schedule.concurrent ? "concurrent" : "sequential", spk_lstm_math_suffix(i->shape.math));
}

static const spk_lua_gpu_plan_type plan_type = {.metatable = "spk.lstm.stack",
                                                .closed_name = "lstm stack persistent (closed)",
                                                .free = plan_free,
                                                .time = plan_time,
                                                .time_timeline = plan_time_timeline,
                                                .push_name = plan_push_name};

static int l_stack_new(lua_State *L)
{
    spk_lua_noextra(L, 1);
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    void **slot = spk_lua_gpu_plan_push(L, &plan_type); /* first: nothing allocates after the layers are read */
    spk_persistent_plan_options o;
    memset(&o, 0, sizeof o);
    spk_lua_rawfield(L, 1, "kernel");
    spk_lua_read_kernel_choice(L, -1, &spk_persistent_family, &o.kernel);
    lua_pop(L, 1);
    o.layers = spk_lua_read_stack_shape(L, &o.count, &o.batch, &o.steps);
    spk_schedule schedule;
    if (spk_lua_rawfield(L, 1, "schedule") != LUA_TNIL) {
        read_schedule(L, -1, &schedule);
        o.schedule = &schedule;
    }
    lua_pop(L, 1);
    o.capacity = spk_lua_int_field(L, 1, "capacity", 0, "stack");
    o.math = spk_lua_read_math(L, 1);
    int64_t timeout_ms = spk_lua_int_field(L, 1, "timeout_ms", 10000, "stack");
    if (timeout_ms < 0)
        return luaL_error(L, "stack.timeout_ms must be >= 0, got %d", (int)timeout_ms);
    o.timeout_ns = (uint64_t)timeout_ms * 1000000u;
    if (!(*slot = spk_persistent_plan_new(&o)))
        return spk_lua_fail(L);
    lua_pushvalue(L, 2);
    return 1;
}

static spk_persistent_plan *check_plan(lua_State *L) { return spk_lua_gpu_plan_check(L, &plan_type); }

/* forward(x, {timeline = selection}) with the selection at the top of the stack. */
static int forward_timeline(lua_State *L)
{
    if (spk_lua_rawfield(L, 3, "trace") != LUA_TNIL)
        return luaL_error(L, "forward: trace and timeline are separate builds of the kernel; ask for one at a time");
    lua_pop(L, 1);
    spk_timeline_selection sel;
    spk_lua_read_timeline_selection(L, -1, &sel);
    spk_persistent_plan *p = check_plan(L);
    const spk_tensor *x = spk_lua_checktensor(L, 2);
    spk_tensor *stamps = NULL;
    spk_timeline_clock clock;
    spk_persistent_timeline_build build;
    spk_tensor *y = spk_persistent_plan_forward_timeline(p, x, &sel, &stamps, &clock, &build);
    if (!y)
        return spk_lua_fail(L);
    spk_lua_pushtensor(L, y);
    spk_lua_pushtensor(L, stamps);
    spk_lua_push_timeline_columns(L, spk_persistent_timeline_stages());
    spk_lua_push_timeline_clock(L, &clock);
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, build.attrs.registers), lua_setfield(L, -2, "registers");
    lua_pushinteger(L, (lua_Integer)build.attrs.local_bytes), lua_setfield(L, -2, "spills");
    lua_pushinteger(L, build.capacity), lua_setfield(L, -2, "capacity");
    return 5;
}

static int l_forward(lua_State *L)
{
    check_plan(L); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 3);
    check_plan(L); /* arguments in order; the pointers are taken after the last allocation */
    spk_lua_checktensor(L, 2);
    if (lua_isnoneornil(L, 3)) {
        spk_lua_pushtensor(L, spk_persistent_plan_forward(check_plan(L), spk_lua_checktensor(L, 2)));
        return 1;
    }
    luaL_checktype(L, 3, LUA_TTABLE);
    static const char *const keys[] = {"trace", "timeline", NULL};
    spk_lua_checkkeys(L, 3, keys, "forward");
    if (spk_lua_rawfield(L, 3, "timeline") != LUA_TNIL)
        return forward_timeline(L);
    lua_pop(L, 1);
    spk_lua_rawfield(L, 3, "trace");
    if (lua_isnil(L, -1)) {
        spk_lua_pushtensor(L, spk_persistent_plan_forward(check_plan(L), spk_lua_checktensor(L, 2)));
        return 1;
    }
    int64_t *steps = lua_newuserdatauv(L, sizeof *steps * SPK_LSTM_TRACE_MAX_STEPS, 0);
    spk_lstm_trace trace;
    spk_lua_read_trace(L, -2, &trace, steps);
    spk_persistent_plan *p = check_plan(L);
    spk_tensor *x = spk_lua_checktensor(L, 2);
    spk_tensor *h = NULL, *c = NULL;
    spk_tensor *y = spk_persistent_plan_forward_trace(p, x, &trace, &h, &c);
    if (!y)
        return spk_lua_fail(L);
    spk_lua_push_traced(L, y, &trace, h, c);
    return 2;
}

static int l_trace_check(lua_State *L)
{
    spk_lua_noextra(L, 3);
    int64_t *steps = lua_newuserdatauv(L, sizeof *steps * SPK_LSTM_TRACE_MAX_STEPS, 0);
    spk_lstm_trace trace;
    spk_lua_read_trace(L, 1, &trace, steps);
    if (spk_lstm_trace_check(&trace, luaL_checkinteger(L, 2), luaL_checkinteger(L, 3)) != 0)
        return spk_lua_fail(L);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_info(lua_State *L)
{
    check_plan(L); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 1);
    /* a copy: the tables made below may run a finalizer that closes the plan */
    const spk_persistent_plan_info copy = *spk_persistent_plan_get_info(check_plan(L)), *info = &copy;
    lua_createtable(L, 0, 16);
    push_variant(L, &info->variant, &info->geometry);
    lua_pushinteger(L, info->attrs.registers), lua_setfield(L, -2, "registers");
    lua_pushinteger(L, (lua_Integer)info->attrs.local_bytes), lua_setfield(L, -2, "spills");
    lua_pushinteger(L, (lua_Integer)info->attrs.static_smem), lua_setfield(L, -2, "static_smem");
    lua_pushinteger(L, info->blocks_per_sm), lua_setfield(L, -2, "occupancy");
    lua_pushinteger(L, info->device_capacity), lua_setfield(L, -2, "device_capacity");
    lua_pushinteger(L, info->capacity), lua_setfield(L, -2, "capacity");
    lua_pushinteger(L, info->concurrent_capacity), lua_setfield(L, -2, "concurrent_capacity");
    lua_pushstring(L, info->arch), lua_setfield(L, -2, "arch");
    lua_setfield(L, -2, "kernel");
    push_schedule(L, &info->schedule);
    lua_setfield(L, -2, "schedule");
    lua_createtable(L, 0, 5);
    spk_lua_set_timeline_stages(L, spk_persistent_timeline_stages());
    lua_pushinteger(L, (lua_Integer)(info->geometry.groups * info->schedule.tiles)), lua_setfield(L, -2, "blocks");
    lua_pushinteger(L, info->variant.threads / 32), lua_setfield(L, -2, "warps");
    lua_pushinteger(L, info->geometry.groups), lua_setfield(L, -2, "group");
    lua_setfield(L, -2, "timeline");
    spk_lua_set_gpu_shape(L, &info->shape);
    return 1;
}

static int l_schedule_fits(lua_State *L)
{
    spk_lua_noextra(L, 5);
    spk_schedule s;
    read_schedule(L, 1, &s);
    spk_persistent_variant v;
    read_variant(L, 2, s.batch, (int)luaL_optinteger(L, 5, 128), &v);
    lua_Integer cap = luaL_checkinteger(L, 3), conc = luaL_optinteger(L, 4, cap);
    if (spk_persistent_schedule_fits(&s, &v, cap, conc) != 0)
        return spk_lua_fail(L);
    lua_pushboolean(L, 1);
    return 1;
}

void spk_open_persistent(lua_State *L, int module)
{
    spk_lua_gpu_plan_register(L, &plan_type, l_forward, l_info);
    static const spk_lua_reg functions[] = {
        {"persistent_stack_new", l_stack_new,
         "spk.core.persistent_stack_new{layers =, batch =, steps =, kernel =, schedule =, capacity =, timeout_ms =,\n"
         "  math =} -> plan\nThe persistent kernel's plan (what spk.lstm.stack{backend = \"persistent\"} builds)."},
        {"persistent_variant", l_variant,
         "spk.core.persistent_variant(kernel, batch[, hidden = 128]) -> variant\n"
         "The variant a plan of that batch compiles (options left out: the batch's default); what\n"
         "spk.lstm.kernel_variant{backend = \"persistent\"} calls. No device needed."},
        {"persistent_options", l_options,
         "spk.core.persistent_options() -> {backend =, options = {...}, rules = {...}, text =}\n"
         "The persistent kernel's option table as data (what spk.lstm.kernel_options(\"persistent\") returns)."},
        {"persistent_schedule_fits", l_schedule_fits,
         "spk.core.persistent_schedule_fits(schedule, kernel, capacity[, concurrent[, hidden = 128]]) -> true\n"
         "Whether a schedule's launches fit the device's co-resident blocks, or an error saying why."},
        {"persistent_trace_check", l_trace_check,
         "spk.core.persistent_trace_check(trace, layers, steps) -> true\nThe error a traced forward would give, or true."},
        {NULL, NULL, NULL},
    };
    lua_pushvalue(L, module);
    spk_lua_setfuncs(L, functions, 0);
    lua_pop(L, 1);
}
