/* Bindings of the stack around a recurrence kernel (lstm/kernel_stack.h):
 * thin; the friendly API, the launch rule and the kernel files are
 * lua/spk/kernel_stack.lua's.
 *   core.kernel_stack_new{layers =, batch =, steps =, math =, module =, entry =, <description>} -> plan
 *   core.kernel_stack_check(<description>[, params]) -> true: the description's checks, and with
 *                   params (module:params(entry) of the kernel's PTX) the parameters against args
 *   core.kernel_stack_contract() -> {{name =, c_type =, kind =, meaning =, both =}, ...}
 * The description: name, args = {"gates", ...}, launches = {{direction = "forward" | "reverse" | "both",
 * grid =, block =, cluster =, smem =, cooperative =, co_resident =, first_tile =}, ...}, concurrent,
 * tile_rows, state_words, timeout_ms, watchdog_ms, packing = {order =, layout =}, statuses =
 * {[code] = message}, check_writes. Tables are read raw; the layers' tensors and the module are taken
 * after the last allocation. */
#include <string.h>

#include "core/error.h"
#include "lstm/kernel_stack.h"
#include "lua/cuda_area.h"
#include "lua/plan.h"

#define MAX_LAUNCHES 64
#define MAX_STATUSES 32

/* A description read from Lua, with its storage; strings stay referenced by
 * the holder table at `holder`. */
typedef struct read_desc {
    spk_kernel_stack_desc desc;
    int args[SPK_KERNEL_STACK_MAX_ARGS];
    spk_kernel_stack_launch launches[MAX_LAUNCHES];
    spk_kernel_stack_status statuses[MAX_STATUSES];
} read_desc;

static const char *const desc_keys[] = {"name", "args", "launches", "concurrent", "tile_rows", "state_words",
                                        "timeout_ms", "watchdog_ms", "packing", "statuses", "check_writes", NULL};

#define int_in spk_lua_intfield
#define bool_field spk_lua_boolfield

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
        o->smem = (size_t)int_in(L, l, "smem", 0, 0, 1 << 30, where);
        o->cooperative = bool_field(L, l, "cooperative", where);
        o->co_resident = bool_field(L, l, "co_resident", where);
        o->first_tile = (int32_t)int_in(L, l, "first_tile", 0, 0, INT32_MAX, where);
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

/* Reads the description at t into r (strings held by `holder`) and checks it. */
static void read_description(lua_State *L, int t, read_desc *r, int holder)
{
    memset(r, 0, sizeof *r);
    r->desc.name = held_string(L, t, "name", holder, "kernel");
    read_args(L, t, r);
    read_launches(L, t, r);
    read_statuses(L, t, r, holder);
    read_packing(L, t, r, holder);
    r->desc.concurrent = bool_field(L, t, "concurrent", "kernel");
    r->desc.check_writes = bool_field(L, t, "check_writes", "kernel");
    r->desc.tile_rows = (int32_t)int_in(L, t, "tile_rows", 0, 0, INT32_MAX, "kernel");
    r->desc.state_words = (int64_t)int_in(L, t, "state_words", 0, 0, (lua_Integer)1 << 40, "kernel");
    r->desc.timeout_ns = (uint64_t)int_in(L, t, "timeout_ms", 10000, 0, (lua_Integer)1 << 40, "kernel") * 1000000u;
    r->desc.watchdog_ns = (uint64_t)int_in(L, t, "watchdog_ms", 0, 0, (lua_Integer)1 << 40, "kernel") * 1000000u;
    if (spk_kernel_stack_desc_check(&r->desc) != 0)
        spk_lua_fail(L);
}

/* ---- the plan ---------------------------------------------------------------- */

static const char *const new_keys[] = {"layers", "batch", "steps", "math", "module", "entry", "name", "args",
                                       "launches", "concurrent", "tile_rows", "state_words", "timeout_ms",
                                       "watchdog_ms", "packing", "statuses", "check_writes", NULL};

static int l_stack_new(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    spk_lua_checkkeys(L, 1, new_keys, "kernel_stack_new");
    lua_settop(L, 1);
    void **slot = spk_lua_newobject(L, &spk_lua_plan_type); /* 2; first: nothing allocates after the layers are read */
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
    spk_lstm_layer layers[SPK_LUA_PLAN_MAX_LAYERS];
    o.layers = layers;
    o.count = spk_lua_read_stack(L, layers, &o.batch, &o.steps, &o.math);
    o.module = spk_lua_checkobject(L, module, &spk_lua_module_type); /* after the last allocation */
    if (!(*slot = spk_stack_plan_of_kernel(&o)))
        return spk_lua_fail(L);
    lua_pushvalue(L, 2);
    return 1;
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
        params[i].size = (size_t)int_in(L, p, "size", 0, 0, 1 << 20, "params");
        params[i].elements = (int)int_in(L, p, "elements", 1, 1, 1 << 20, "params");
        lua_pop(L, 1);
    }
    if (spk_recurrence_check_params(r->desc.name ? r->desc.name : "?", r->desc.args, r->desc.nargs, params, n) != 0)
        return spk_lua_fail(L);
    lua_pushboolean(L, 1);
    return 1;
}

static const char *kind_name(spk_arg_kind kind)
{
    switch (kind) {
    case SPK_ARG_PTR: return "pointer";
    case SPK_ARG_I32: return "i32";
    case SPK_ARG_U32: return "u32";
    case SPK_ARG_U64: return "u64";
    case SPK_ARG_I64: return "i64";
    case SPK_ARG_F32: return "f32";
    case SPK_ARG_F64: return "f64";
    }
    return "?";
}

static int l_contract(lua_State *L)
{
    lua_createtable(L, SPK_RA_COUNT, 0);
    for (int i = 0; i < SPK_RA_COUNT; i++) {
        const spk_recurrence_arg_info *a = &spk_recurrence_args[i];
        lua_createtable(L, 0, 5);
        lua_pushstring(L, a->name), lua_setfield(L, -2, "name");
        lua_pushstring(L, kind_name(a->kind)), lua_setfield(L, -2, "kind");
        lua_pushstring(L, a->c_type), lua_setfield(L, -2, "c_type");
        lua_pushstring(L, a->meaning), lua_setfield(L, -2, "meaning");
        lua_pushstring(L, a->both ? a->both : a->meaning), lua_setfield(L, -2, "both");
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

void spk_open_kernel_stack(lua_State *L, int module)
{
    static const spk_lua_checked_reg functions[] = {
        {"kernel_stack_new", l_stack_new,
         "spk.core.kernel_stack_new{layers =, batch =, steps =, math =, module =, entry =, args =, launches =, ...}\n"
         "  -> plan\nThe stack around a recurrence kernel (what spk.lstm.kernel_stack builds).",
         "options"},
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
    lua_pushvalue(L, module);
    spk_lua_setfuncs_module(L, functions, "spk.core");
    lua_pop(L, 1);
}
