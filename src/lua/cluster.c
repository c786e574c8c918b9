/* Bindings of the cluster GPU stack (lstm/cluster.h): thin, the options and
 * their defaults are spk_cluster_family's.
 *   core.cluster_stack_new{layers =, batch =, steps =, math = "fp32" | "tf32", kernel = {option = value, ...}}
 *                                    -> plan userdata
 *   plan:forward(x[, {timeline = selection}]) -> tensor on x's device
 *                   (with a timeline: y, stamps, columns, clock, build: the timeline build recording the
 *                   selection, 0-based as lua/timeline.h reads it; build = {registers =, spills =,
 *                   max_active_clusters =, waves =} of that build)
 *   plan:time(x, rounds, warmup[, selection]) -> {ms, ...}
 *   plan:info() -> table (the variant, its sizes and kernel attributes, the schedule, and timeline =
 *                   {stages =, waits_for =, blocks =, warps =, group =}: what a timeline records)
 *   plan:close()
 *   core.cluster_variant(kernel_table | nil, batch, hidden) -> the variant a plan of that batch compiles
 *                                    (options by name, file, sizes, defines, launch_tile_rows)
 *   core.cluster_options() -> the option table as data (lstm/kernel_options.h)
 *   core.cluster_schedule_pick(batch, {heights}, {max_active}, forced) -> schedule table
 * Layers are a list of tables {W =, R =, B =} of host tensors. Argument
 * tables are read raw and the tensors' pointers taken after the last
 * allocation (lua/bind.h); extra arguments are errors. */
#include <string.h>

#include "core/error.h"
#include "lstm/cluster.h"
#include "lstm/device_layers.h"
#include "lua/bind.h"
#include "lua/gpu_plan.h"
#include "lua/timeline.h"

static void push_variant(lua_State *L, const spk_cluster_variant *v, const spk_cluster_sizes *s)
{
    lua_createtable(L, 0, 24);
    spk_lua_set_kernel_options(L, &spk_cluster_family, v);
    lua_pushstring(L, s->file), lua_setfield(L, -2, "file");
    lua_pushinteger(L, s->units), lua_setfield(L, -2, "units");
    lua_pushinteger(L, s->gate_rows), lua_setfield(L, -2, "gate_rows");
    lua_pushinteger(L, s->chunks), lua_setfield(L, -2, "chunks");
    lua_pushinteger(L, s->slots), lua_setfield(L, -2, "slots");
    lua_pushinteger(L, s->registers), lua_setfield(L, -2, "register_budget");
    lua_pushinteger(L, (lua_Integer)s->smem_bytes), lua_setfield(L, -2, "smem_bytes");
}

static int l_variant(lua_State *L)
{
    spk_lua_noextra(L, 3);
    spk_kernel_choice choice;
    spk_lua_read_kernel_choice(L, 1, &spk_cluster_family, &choice);
    lua_Integer batch = luaL_checkinteger(L, 2), hidden = luaL_optinteger(L, 3, 128);
    if (batch < 1 || hidden < 1 || hidden > 1 << 20)
        return luaL_error(L, "cluster_variant: batch and hidden must be positive");
    spk_cluster_variant v;
    int64_t tile_rows = 0;
    spk_cluster_sizes sizes;
    if (spk_cluster_variant_resolve((int)hidden, batch, &choice, &v, &tile_rows) != 0 ||
        spk_cluster_variant_derive(&v, tile_rows > 0 ? (int)tile_rows : 0, &sizes) != 0)
        return spk_lua_fail(L);
    push_variant(L, &v, &sizes);
    lua_pushinteger(L, (lua_Integer)tile_rows), lua_setfield(L, -2, "launch_tile_rows");
    return 1;
}

static int l_options(lua_State *L)
{
    spk_lua_noextra(L, 0);
    spk_lua_push_kernel_family(L, &spk_cluster_family);
    return 1;
}

static void push_schedule(lua_State *L, const spk_cluster_schedule *s)
{
    lua_createtable(L, 0, 8);
    lua_pushinteger(L, s->batch), lua_setfield(L, -2, "batch");
    lua_pushinteger(L, s->tile_rows), lua_setfield(L, -2, "tile_rows");
    lua_pushinteger(L, s->tiles), lua_setfield(L, -2, "tiles");
    lua_pushinteger(L, s->clusters), lua_setfield(L, -2, "clusters");
    lua_pushinteger(L, s->max_active), lua_setfield(L, -2, "max_active_clusters");
    lua_pushinteger(L, s->waves), lua_setfield(L, -2, "waves");
    lua_pushinteger(L, 1), lua_setfield(L, -2, "launches"); /* per layer: both directions, every tile */
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

static int l_schedule_pick(lua_State *L)
{
    spk_lua_noextra(L, 4);
    lua_Integer batch = luaL_checkinteger(L, 1);
    int64_t heights[SPK_CLUSTER_MAX_HEIGHTS + 1], active[SPK_CLUSTER_MAX_HEIGHTS + 1];
    int n = read_list(L, 2, heights, SPK_CLUSTER_MAX_HEIGHTS + 1, "heights");
    if (read_list(L, 3, active, SPK_CLUSTER_MAX_HEIGHTS + 1, "max_active") != n)
        return luaL_error(L, "max_active must have one entry per height");
    spk_cluster_schedule s;
    if (spk_cluster_schedule_pick(&s, batch, heights, active, n, luaL_optinteger(L, 4, 0)) != 0)
        return spk_lua_fail(L);
    push_schedule(L, &s);
    return 1;
}

static void plan_free(void *plan) { spk_cluster_plan_free(plan); }

static int plan_time(void *plan, const spk_tensor *x, int rounds, int warmup, double *ms)
{
    return spk_cluster_plan_time(plan, x, rounds, warmup, ms);
}

static int plan_time_timeline(void *plan, const spk_tensor *x, const spk_timeline_selection *sel, int rounds,
                              int warmup, double *ms)
{
    return spk_cluster_plan_time_timeline(plan, x, sel, rounds, warmup, ms);
}

static void plan_push_name(lua_State *L, const void *plan)
{
    const spk_cluster_plan_info *i = spk_cluster_plan_get_info(plan);
    lua_pushfstring(L, "lstm stack (cluster %d, %d layers, batch %d, steps %d, tile_rows %d, %d clusters%s)",
                    i->variant.cluster, (int)i->shape.layers, (int)i->shape.batch, (int)i->shape.steps,
                    (int)i->schedule.tile_rows, (int)i->schedule.clusters, spk_lstm_math_suffix(i->shape.math));
}

static const spk_lua_gpu_plan_type plan_type = {.metatable = "spk.lstm.cluster_stack",
                                                .closed_name = "lstm stack cluster (closed)",
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
    spk_cluster_plan_options o;
    memset(&o, 0, sizeof o);
    spk_lua_rawfield(L, 1, "kernel");
    spk_lua_read_kernel_choice(L, -1, &spk_cluster_family, &o.kernel);
    lua_pop(L, 1);
    o.math = spk_lua_read_math(L, 1);
    o.layers = spk_lua_read_stack_shape(L, &o.count, &o.batch, &o.steps);
    if (!(*slot = spk_cluster_plan_new(&o)))
        return spk_lua_fail(L);
    lua_pushvalue(L, 2);
    return 1;
}

static spk_cluster_plan *check_plan(lua_State *L) { return spk_lua_gpu_plan_check(L, &plan_type); }

static const char *const forward_keys[] = {"timeline", NULL};

static int l_forward(lua_State *L)
{
    check_plan(L); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 3);
    spk_lua_checktensor(L, 2);
    spk_timeline_selection sel;
    bool timeline = false;
    if (!lua_isnoneornil(L, 3)) {
        if (lua_type(L, 3) != LUA_TTABLE)
            return luaL_error(L, "forward: options must be a table {timeline =}, got %s", spk_lua_describe(L, 3));
        spk_lua_checkkeys(L, 3, forward_keys, "forward");
        if ((timeline = spk_lua_rawfield(L, 3, "timeline") != LUA_TNIL))
            spk_lua_read_timeline_selection(L, -1, &sel);
        lua_pop(L, 1);
    }
    spk_cluster_plan *p = check_plan(L);
    const spk_tensor *x = spk_lua_checktensor(L, 2);
    if (!timeline) {
        spk_lua_pushtensor(L, spk_cluster_plan_forward(p, x));
        return 1;
    }
    spk_tensor *stamps = NULL;
    spk_timeline_clock clock;
    spk_cluster_timeline_build build;
    spk_tensor *y = spk_cluster_plan_forward_timeline(p, x, &sel, &stamps, &clock, &build);
    if (!y)
        return spk_lua_fail(L);
    /* a static list, taken before the tables below may run a finalizer that closes the plan */
    const spk_timeline_stages *stages = spk_cluster_timeline_stages(&spk_cluster_plan_get_info(p)->variant);
    spk_lua_pushtensor(L, y);
    spk_lua_pushtensor(L, stamps);
    spk_lua_push_timeline_columns(L, stages);
    spk_lua_push_timeline_clock(L, &clock);
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, build.attrs.registers), lua_setfield(L, -2, "registers");
    lua_pushinteger(L, (lua_Integer)build.attrs.local_bytes), lua_setfield(L, -2, "spills");
    lua_pushinteger(L, build.max_active), lua_setfield(L, -2, "max_active_clusters");
    lua_pushinteger(L, build.waves), lua_setfield(L, -2, "waves");
    return 5;
}

static int l_info(lua_State *L)
{
    check_plan(L); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 1);
    /* a copy: the tables made below may run a finalizer that closes the plan */
    const spk_cluster_plan_info copy = *spk_cluster_plan_get_info(check_plan(L)), *info = &copy;
    lua_createtable(L, 0, 8);
    push_variant(L, &info->variant, &info->sizes);
    lua_pushinteger(L, info->attrs.registers), lua_setfield(L, -2, "registers");
    lua_pushinteger(L, (lua_Integer)info->attrs.local_bytes), lua_setfield(L, -2, "spills");
    lua_pushinteger(L, (lua_Integer)info->sizes.smem_bytes), lua_setfield(L, -2, "smem");
    lua_pushinteger(L, (lua_Integer)info->attrs.static_smem), lua_setfield(L, -2, "static_smem");
    lua_pushinteger(L, info->schedule.max_active), lua_setfield(L, -2, "max_active_clusters");
    lua_pushinteger(L, info->sms), lua_setfield(L, -2, "sms");
    lua_pushstring(L, info->arch), lua_setfield(L, -2, "arch");
    lua_setfield(L, -2, "kernel");
    push_schedule(L, &info->schedule);
    lua_setfield(L, -2, "schedule");
    lua_createtable(L, 0, 5);
    spk_lua_set_timeline_stages(L, spk_cluster_timeline_stages(&info->variant));
    lua_pushinteger(L, (lua_Integer)(info->variant.cluster * info->schedule.tiles)), lua_setfield(L, -2, "blocks");
    lua_pushinteger(L, info->variant.threads / 32), lua_setfield(L, -2, "warps");
    lua_pushinteger(L, info->variant.cluster), lua_setfield(L, -2, "group");
    lua_setfield(L, -2, "timeline");
    spk_lua_set_gpu_shape(L, &info->shape);
    return 1;
}

void spk_open_cluster(lua_State *L, int module)
{
    spk_lua_gpu_plan_register(L, &plan_type, l_forward, l_info);
    static const spk_lua_reg functions[] = {
        {"cluster_stack_new", l_stack_new,
         "spk.core.cluster_stack_new{layers =, batch =, steps =, math =, kernel = {...}} -> plan\n"
         "The cluster kernel's plan (what spk.lstm.stack{backend = \"cluster\"} builds)."},
        {"cluster_variant", l_variant,
         "spk.core.cluster_variant(kernel, batch[, hidden = 128]) -> variant\n"
         "The variant a plan of that batch compiles (options left out: the batch's default), its file, sizes\n"
         "and defines; what spk.lstm.kernel_variant{backend = \"cluster\"} calls. No device needed."},
        {"cluster_options", l_options,
         "spk.core.cluster_options() -> {backend =, options = {...}, rules = {...}, text =}\n"
         "The cluster kernels' option table as data (what spk.lstm.kernel_options(\"cluster\") returns)."},
        {"cluster_schedule_pick", l_schedule_pick,
         "spk.core.cluster_schedule_pick(batch, heights, max_active[, tile_rows]) -> schedule\n"
         "The tile height and waves the cluster plan picks, given each height's co-resident clusters."},
        {NULL, NULL, NULL},
    };
    lua_pushvalue(L, module);
    spk_lua_setfuncs(L, functions, 0);
    lua_pop(L, 1);
}
