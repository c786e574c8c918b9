/* Bindings of the cluster GPU stack (lstm/cluster.h):
 *   core.cluster_stack_new{layers =, batch =, steps =, tile_rows =, math = "fp32" | "tf32",
 *                          kernel = {hidden =, cluster =, threads =, gate_block =, gates_ahead =, tile_rows =,
 *                                    row_group =, directions =, row_phases =,
 *                                    min_blocks =, weights_shared =, cell_in_lanes =, late_store =,
 *                                    vector_push =, mbarrier_exchange =, direct_push =, warp_push =}}
 *                                    -> plan userdata
 *   plan:forward(x) -> tensor on x's device
 *   plan:time(rounds, warmup) -> {ms, ...}
 *   plan:info() -> table (kernel attributes, schedule)
 *   plan:close()
 *   core.cluster_variant_check(kernel_table) -> the fitted variant, its geometry and defines
 *   core.cluster_variant_for_batch(hidden, batch) -> the plan's default variant for a batch
 *   core.cluster_schedule_pick(batch, {heights}, {max_active}, forced, directions) -> schedule table
 * Layers are a list of tables {W =, R =, B =} of host tensors. */
#include <string.h>

#include "core/error.h"
#include "lstm/cluster.h"
#include "lstm/device_layers.h"
#include "lua/bind.h"
#include "lua/gpu_plan.h"

static void read_variant(lua_State *L, int idx, spk_cluster_variant *v)
{
    memset(v, 0, sizeof *v);
    if (!lua_isnoneornil(L, idx)) {
        luaL_checktype(L, idx, LUA_TTABLE);
        int t = lua_absindex(L, idx);
        v->hidden = (int)spk_lua_int_field(L, t, "hidden", 128, "kernel");
        v->cluster = (int)spk_lua_int_field(L, t, "cluster", 0, "kernel");
        v->threads = (int)spk_lua_int_field(L, t, "threads", 0, "kernel");
        v->gate_block = (int)spk_lua_int_field(L, t, "gate_block", 0, "kernel");
        v->gates_ahead = (int)spk_lua_int_field(L, t, "gates_ahead", 0, "kernel");
        v->max_tile_rows = (int)spk_lua_int_field(L, t, "tile_rows", 0, "kernel");
        v->row_group = (int)spk_lua_int_field(L, t, "row_group", 0, "kernel");
        v->min_blocks = (int)spk_lua_int_field(L, t, "min_blocks", 0, "kernel");
        v->directions = (int)spk_lua_int_field(L, t, "directions", 0, "kernel");
        v->row_phases = (int)spk_lua_int_field(L, t, "row_phases", 0, "kernel");
        static const char *flags[] = {"weights_shared", "cell_in_lanes", "late_store", "vector_push",
                                      "mbarrier_exchange", "direct_push", "warp_push"};
        bool *slots[] = {&v->weights_shared, &v->cell_in_lanes, &v->late_store, &v->vector_push,
                         &v->mbarrier_exchange, &v->direct_push, &v->warp_push};
        for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
            spk_lua_rawfield(L, t, flags[i]);
            *slots[i] = lua_toboolean(L, -1);
            lua_pop(L, 1);
        }
    } else {
        v->hidden = 128;
    }
    spk_cluster_variant_fit(v);
}

static void push_variant(lua_State *L, const spk_cluster_variant *v, const spk_cluster_geometry *g)
{
    lua_createtable(L, 0, 24);
    lua_pushinteger(L, v->hidden), lua_setfield(L, -2, "hidden");
    lua_pushinteger(L, v->cluster), lua_setfield(L, -2, "cluster");
    lua_pushinteger(L, v->threads), lua_setfield(L, -2, "threads");
    lua_pushinteger(L, v->gate_block), lua_setfield(L, -2, "gate_block");
    lua_pushinteger(L, v->gates_ahead), lua_setfield(L, -2, "gates_ahead");
    lua_pushinteger(L, v->max_tile_rows), lua_setfield(L, -2, "max_tile_rows");
    lua_pushinteger(L, v->row_group), lua_setfield(L, -2, "row_group");
    lua_pushinteger(L, v->min_blocks), lua_setfield(L, -2, "min_blocks");
    lua_pushinteger(L, v->directions), lua_setfield(L, -2, "directions");
    lua_pushinteger(L, v->row_phases), lua_setfield(L, -2, "row_phases");
    lua_pushstring(L, v->weights_shared ? "shared" : "registers"), lua_setfield(L, -2, "weights");
    lua_pushstring(L, v->cell_in_lanes ? "lanes" : "shared"), lua_setfield(L, -2, "cell");
    lua_pushstring(L, v->late_store ? "late" : "step"), lua_setfield(L, -2, "store");
    lua_pushstring(L, v->warp_push ? "warp" : v->direct_push ? "direct" : v->vector_push ? "vector" : "scalar");
    lua_setfield(L, -2, "push");
    lua_pushstring(L, v->mbarrier_exchange ? "mbarrier" : "barrier"), lua_setfield(L, -2, "exchange");
    lua_pushinteger(L, g->units), lua_setfield(L, -2, "units");
    lua_pushinteger(L, g->gate_rows), lua_setfield(L, -2, "gate_rows");
    lua_pushinteger(L, g->chunks), lua_setfield(L, -2, "chunks");
    lua_pushinteger(L, g->cells), lua_setfield(L, -2, "cells");
    spk_cluster_variant_defines d;
    spk_cluster_variant_defines_fill(v, &d);
    spk_lua_set_defines(L, d.defines, SPK_CLUSTER_VARIANT_DEFINES);
}

static int l_variant_check(lua_State *L)
{
    spk_lua_noextra(L, 1);
    spk_cluster_variant v;
    read_variant(L, 1, &v);
    spk_cluster_geometry g;
    if (spk_cluster_variant_check(&v, &g) != 0)
        return spk_lua_fail(L);
    push_variant(L, &v, &g);
    lua_pushinteger(L, (lua_Integer)spk_cluster_smem_bytes(&v, v.max_tile_rows));
    lua_setfield(L, -2, "smem_bytes");
    return 1;
}

/* core.cluster_variant_for_batch(hidden, batch) -> the default variant (as
 * cluster_variant_check returns it) with tile_rows = the row's height (0: picked). */
static int l_variant_for_batch(lua_State *L)
{
    spk_lua_noextra(L, 2);
    lua_Integer hidden = luaL_checkinteger(L, 1), batch = luaL_checkinteger(L, 2);
    if (hidden < 1 || hidden > 1 << 20 || batch < 1)
        return luaL_error(L, "cluster_variant_for_batch: hidden and batch must be positive");
    int64_t tile_rows = 0;
    spk_cluster_variant v = spk_cluster_variant_for_batch((int)hidden, batch, &tile_rows);
    spk_cluster_geometry g;
    if (spk_cluster_variant_check(&v, &g) != 0)
        return spk_lua_fail(L);
    push_variant(L, &v, &g);
    lua_pushinteger(L, (lua_Integer)tile_rows), lua_setfield(L, -2, "tile_rows");
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
    spk_lua_noextra(L, 5);
    lua_Integer batch = luaL_checkinteger(L, 1);
    int64_t heights[SPK_CLUSTER_MAX_HEIGHTS + 1], active[SPK_CLUSTER_MAX_HEIGHTS + 1];
    int n = read_list(L, 2, heights, SPK_CLUSTER_MAX_HEIGHTS + 1, "heights");
    if (read_list(L, 3, active, SPK_CLUSTER_MAX_HEIGHTS + 1, "max_active") != n)
        return luaL_error(L, "max_active must have one entry per height");
    spk_cluster_schedule s;
    if (spk_cluster_schedule_pick(&s, batch, heights, active, n, luaL_optinteger(L, 4, 0),
                                  (int)luaL_optinteger(L, 5, 1)) != 0)
        return spk_lua_fail(L);
    push_schedule(L, &s);
    return 1;
}

static void plan_free(void *plan) { spk_cluster_plan_free(plan); }

static int plan_time(void *plan, const spk_tensor *x, int rounds, int warmup, double *ms)
{
    return spk_cluster_plan_time(plan, x, rounds, warmup, ms);
}

static void plan_push_name(lua_State *L, const void *plan)
{
    const spk_cluster_plan_info *i = spk_cluster_plan_get_info(plan);
    lua_pushfstring(L, "lstm stack (cluster %d, %d layers, batch %d, steps %d, tile_rows %d, %d clusters%s)",
                    i->variant.cluster, (int)i->shape.layers, (int)i->shape.batch, (int)i->shape.steps,
                    (int)i->schedule.tile_rows, (int)i->schedule.clusters,
                    i->shape.math == SPK_MATH_TF32 ? ", tf32 projections" : "");
}

static const spk_lua_gpu_plan_type plan_type = {.metatable = "spk.lstm.cluster_stack",
                                                .closed_name = "lstm stack (cluster, closed)",
                                                .free = plan_free,
                                                .time = plan_time,
                                                .push_name = plan_push_name};

static int l_stack_new(lua_State *L)
{
    spk_lua_noextra(L, 1);
    luaL_checktype(L, 1, LUA_TTABLE);
    void **slot = spk_lua_gpu_plan_push(L, &plan_type); /* first: nothing allocates after the layers are read */
    spk_cluster_plan_options o;
    memset(&o, 0, sizeof o);
    o.layers = spk_lua_read_stack_shape(L, &o.count, &o.batch, &o.steps);
    o.tile_rows = spk_lua_int_field(L, 1, "tile_rows", 0, "stack");
    o.math = spk_lua_read_math(L, 1);
    spk_lua_rawfield(L, 1, "kernel");
    read_variant(L, -1, &o.variant);
    lua_pop(L, 1);
    if (!(*slot = spk_cluster_plan_new(&o)))
        return spk_lua_fail(L);
    lua_pushvalue(L, 2);
    return 1;
}

static spk_cluster_plan *check_plan(lua_State *L) { return spk_lua_gpu_plan_check(L, &plan_type); }

static int l_forward(lua_State *L)
{
    check_plan(L); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 2);
    spk_cluster_plan *p = check_plan(L);
    spk_lua_pushtensor(L, spk_cluster_plan_forward(p, spk_lua_checktensor(L, 2)));
    return 1;
}

static int l_info(lua_State *L)
{
    check_plan(L); /* self first: a closed one is what is wrong */
    spk_lua_noextra(L, 1);
    /* a copy: the tables made below may run a finalizer that closes the plan */
    const spk_cluster_plan_info copy = *spk_cluster_plan_get_info(check_plan(L)), *info = &copy;
    lua_createtable(L, 0, 8);
    push_variant(L, &info->variant, &info->geometry);
    lua_pushinteger(L, info->attrs.registers), lua_setfield(L, -2, "registers");
    lua_pushinteger(L, (lua_Integer)info->attrs.local_bytes), lua_setfield(L, -2, "spills");
    lua_pushinteger(L, (lua_Integer)info->smem_bytes), lua_setfield(L, -2, "smem");
    lua_pushinteger(L, (lua_Integer)info->attrs.static_smem), lua_setfield(L, -2, "static_smem");
    lua_pushinteger(L, info->schedule.max_active), lua_setfield(L, -2, "max_active_clusters");
    lua_pushinteger(L, info->sms), lua_setfield(L, -2, "sms");
    lua_pushstring(L, info->arch), lua_setfield(L, -2, "arch");
    lua_setfield(L, -2, "kernel");
    push_schedule(L, &info->schedule);
    lua_setfield(L, -2, "schedule");
    spk_lua_set_gpu_shape(L, &info->shape);
    return 1;
}

void spk_open_cluster(lua_State *L, int module)
{
    spk_lua_gpu_plan_register(L, &plan_type, l_forward, l_info);
    static const spk_lua_reg functions[] = {
        {"cluster_stack_new", l_stack_new,
         "spk.core.cluster_stack_new{layers =, batch =, steps =, tile_rows =, math =, kernel = {...}} -> plan\n"
         "The cluster kernel's plan (what spk.lstm.stack{backend = \"cluster\"} builds)."},
        {"cluster_variant_check", l_variant_check,
         "spk.core.cluster_variant_check(kernel) -> variant\nThe fitted variant, its geometry and defines (no device needed)."},
        {"cluster_variant_for_batch", l_variant_for_batch,
         "spk.core.cluster_variant_for_batch(hidden, batch) -> variant\nThe cluster plan's default variant at a batch."},
        {"cluster_schedule_pick", l_schedule_pick,
         "spk.core.cluster_schedule_pick(batch, heights, max_active[, tile_rows[, directions]]) -> schedule\n"
         "The tile height and waves the cluster plan picks, given each height's co-resident clusters."},
        {NULL, NULL, NULL},
    };
    lua_pushvalue(L, module);
    spk_lua_setfuncs(L, functions, 0);
    lua_pop(L, 1);
}
