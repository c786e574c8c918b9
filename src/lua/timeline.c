/* Bindings of the step timeline (cuda/timeline.h) and its demo plan
 * (cuda/timeline_demo.h); the friendly API is lua/spk/timeline.lua, which
 * reaches these through spk.core only (lua/spk/init.lua keeps timeline_* out
 * of spk's own names).
 *   core.timeline_decode(raw, stage_names[, cycles_per_ns]) -> stamps, columns, clock
 *       raw: host u64 tensor [words]; stamps: host f64 [records, columns];
 *       columns: {{name =, unit =, about =}, ...}; clock: the alignment (see push_clock)
 *   core.timeline_columns(stage_names) -> columns
 *   core.timeline_args: the parameters a timeline build adds (SPK_TIMELINE_ARGS)
 *   core.timeline_demo_stages() -> {names = {...}, waits_for = {k = stage or false, ...}} (1-based)
 *   core.timeline_demo_new{cluster =, batch =, steps =, weights =} -> demo
 *   demo:forward(x[, selection]) -> y[, stamps, columns, clock]
 *   demo:time(x, "plain" | "timeline", rounds[, warmup[, selection]]) -> {ms, ...}
 *   demo:info() -> {cluster =, hidden =, threads =, warps =, tile_rows =, tiles =, blocks =}
 *   demo:close()
 * A selection here is the C one, 0-based: {layer =, direction =, first_step =,
 * steps =, first_block =, blocks =, warp =}; the Lua side turns the user's
 * {layer =, direction =, steps = {first, last}, blocks = {first, last}} into it.
 * Every binding refuses arguments and option keys it does not take; argument
 * tables are read raw (bind.h), and tensor and demo pointers are taken after
 * the last allocation before their use. */
#include <stddef.h>
#include <string.h>

#include "core/error.h"
#include "cuda/timeline.h"
#include "cuda/timeline_demo.h"
#include "lua/areas.h"
#include "lua/timeline.h"


/* The selection's fields, read and pushed by this one list: the member, the
 * value when left out (below lo: required) and the bounds (the rest:
 * cuda/timeline.c). */
#define SELECTION_FIELD(name) #name, offsetof(spk_timeline_selection, name)
static const struct {
    const char *name;
    size_t offset;
    lua_Integer def, lo, hi;
} selection_fields[] = {
    {SELECTION_FIELD(layer), 0, 0, INT32_MAX},       {SELECTION_FIELD(direction), 0, 0, 1},
    {SELECTION_FIELD(first_step), -1, 0, INT32_MAX}, {SELECTION_FIELD(steps), -1, 1, INT32_MAX},
    {SELECTION_FIELD(first_block), -1, 0, INT32_MAX}, {SELECTION_FIELD(blocks), -1, 1, INT32_MAX},
    {SELECTION_FIELD(warp), 0, 0, 31},
};
#define SELECTION_FIELDS ((int)(sizeof selection_fields / sizeof *selection_fields))

static int *selection_member(spk_timeline_selection *sel, int i)
{
    return (int *)(void *)((char *)sel + selection_fields[i].offset);
}

/* The C selection from the 0-based table at idx (bounds: cuda/timeline.c). */
void spk_lua_read_timeline_selection(lua_State *L, int idx, spk_timeline_selection *sel)
{
    if (lua_type(L, idx) != LUA_TTABLE)
        luaL_error(L, "timeline selection must be a table, got %s", spk_lua_describe(L, idx));
    int t = lua_absindex(L, idx);
    const char *keys[SELECTION_FIELDS + 1] = {NULL};
    for (int i = 0; i < SELECTION_FIELDS; i++)
        keys[i] = selection_fields[i].name;
    spk_lua_checkkeys(L, t, keys, "timeline");
    for (int i = 0; i < SELECTION_FIELDS; i++)
        *selection_member(sel, i) = (int)spk_lua_intfield(L, t, selection_fields[i].name, selection_fields[i].def,
                                                          selection_fields[i].lo, selection_fields[i].hi, "timeline");
}

/* Stage names from the list at idx, copied into one userdata left on the
 * stack until the call returns (the pointer array, then the names' bytes):
 * nothing points into the caller's list, which a finalizer could change. */
static void read_stage_names(lua_State *L, int idx, spk_timeline_stages *stages)
{
    if (lua_type(L, idx) != LUA_TTABLE)
        luaL_error(L, "timeline: stage names must be a list of strings, got %s", spk_lua_describe(L, idx));
    idx = lua_absindex(L, idx);
    int n = spk_lua_rawcount(L, idx);
    if (n < 1 || n > SPK_TIMELINE_MAX_STAGES)
        luaL_error(L, "timeline: a step has 1 to %d stages, got %d names", SPK_TIMELINE_MAX_STAGES, n);
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        if (lua_rawgeti(L, idx, i + 1) != LUA_TSTRING)
            luaL_error(L, "timeline: stage %d must be named by a string, got %s", i + 1, spk_lua_describe(L, -1));
        size_t len;
        lua_tolstring(L, -1, &len);
        if (len > 64) /* the names' own check (1 to 31 characters) says why */
            len = 64;
        bytes += len + 1;
        lua_pop(L, 1);
    }
    const char **names = lua_newuserdatauv(L, sizeof *names * (size_t)n + bytes, 0);
    char *text = (char *)(names + n);
    for (int i = 0; i < n; i++) {
        /* read again after the allocation (a finalizer it ran may have
         * changed the list): the copy never outgrows its room */
        size_t len = 0;
        const char *s = lua_rawgeti(L, idx, i + 1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : "";
        if (len > 64)
            len = 64;
        size_t room = (size_t)((char *)(names + n) + bytes - text);
        if (len + 1 > room)
            len = room ? room - 1 : 0;
        memcpy(text, s, len);
        text[len] = '\0';
        names[i] = text;
        text += len + 1;
        lua_pop(L, 1);
    }
    stages->count = n;
    stages->names = names;
    stages->waits_for = NULL;
}

void spk_lua_push_timeline_columns(lua_State *L, const spk_timeline_stages *stages)
{
    int n = spk_timeline_column_count(stages);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        char name[80];
        const char *unit, *about;
        if (spk_timeline_column(stages, i, name, sizeof name, &unit, &about) != 0)
            spk_lua_fail(L);
        lua_createtable(L, 0, 3);
        spk_lua_setstring(L, "name", name);
        spk_lua_setstring(L, "unit", unit);
        spk_lua_setstring(L, "about", about);
        lua_rawseti(L, -2, i + 1);
    }
}

void spk_lua_push_timeline_clock(lua_State *L, const spk_timeline_clock *c)
{
    lua_createtable(L, 0, 10);
    spk_lua_setnumber(L, "cycles_per_ns", c->cycles_per_ns);
    spk_lua_setbool(L, "fitted", c->fitted);
    spk_lua_setnumber(L, "quantum_ns", c->quantum_ns);
    spk_lua_setnumber(L, "residual_ns", c->residual_ns);
    spk_lua_setint(L, "origin", (lua_Integer)c->origin);
    spk_lua_setint(L, "blocks", c->blocks);
    spk_lua_setint(L, "records", (lua_Integer)c->records);
    spk_lua_setint(L, "stamps", (lua_Integer)c->stamps);
    spk_timeline_selection s = c->selection;
    lua_createtable(L, 0, SELECTION_FIELDS);
    for (int i = 0; i < SELECTION_FIELDS; i++)
        spk_lua_setint(L, selection_fields[i].name, *selection_member(&s, i));
    lua_setfield(L, -2, "selection");
}

static int l_decode(lua_State *L)
{
    double rate = luaL_optnumber(L, 3, 0); /* before read_stage_names pushes its copy */
    lua_settop(L, 3);
    spk_lua_checktensor(L, 1); /* its errors first */
    spk_timeline_stages stages;
    read_stage_names(L, 2, &stages); /* allocates: the tensor is taken after it */
    const spk_tensor *raw = spk_lua_checktensor(L, 1);
    spk_timeline_clock clock;
    spk_tensor *stamps = spk_timeline_decode(raw, &stages, rate, &clock);
    if (!stamps)
        return spk_lua_fail(L);
    spk_lua_pushtensor(L, stamps);
    spk_lua_push_timeline_columns(L, &stages);
    spk_lua_push_timeline_clock(L, &clock);
    return 3;
}

static int l_columns(lua_State *L)
{
    lua_settop(L, 1);
    spk_timeline_stages stages;
    read_stage_names(L, 1, &stages);
    if (spk_timeline_stages_check(&stages) != 0)
        return spk_lua_fail(L);
    spk_lua_push_timeline_columns(L, &stages);
    return 1;
}

static void push_stages(lua_State *L, const spk_timeline_stages *st)
{
    lua_createtable(L, 0, 2);
    lua_createtable(L, st->count, 0);
    for (int k = 0; k < st->count; k++) {
        lua_pushstring(L, st->names[k]);
        lua_rawseti(L, -2, k + 1);
    }
    lua_setfield(L, -2, "names");
    lua_createtable(L, st->count, 0);
    for (int k = 0; k < st->count; k++) {
        if (st->waits_for && st->waits_for[k] >= 0)
            lua_pushinteger(L, st->waits_for[k] + 1);
        else
            lua_pushboolean(L, 0);
        lua_rawseti(L, -2, k + 1);
    }
    lua_setfield(L, -2, "waits_for");
}

void spk_lua_set_timeline_stages(lua_State *L, const spk_timeline_stages *st)
{
    lua_createtable(L, st->count, 0);
    for (int k = 0; k < st->count; k++) {
        lua_pushstring(L, st->names[k]);
        lua_rawseti(L, -2, k + 1);
    }
    lua_setfield(L, -2, "stages");
    lua_createtable(L, 0, 2);
    for (int k = 0; k < st->count; k++)
        if (st->waits_for && st->waits_for[k] >= 0) {
            lua_pushstring(L, st->names[st->waits_for[k]]);
            lua_setfield(L, -2, st->names[k]);
        }
    lua_setfield(L, -2, "waits_for");
}

static int l_demo_stages(lua_State *L)
{
    push_stages(L, spk_timeline_demo_stages());
    return 1;
}

/* ---- the demo ------------------------------------------------------------- */

static spk_lua_type demo_type; /* below */

/* Idempotent: __gc, __close and close(). */
static const char *const demo_keys[] = {"cluster", "batch", "steps", "weights", NULL};

static int l_demo_new(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    spk_lua_checkkeys(L, 1, demo_keys, "timeline_demo_new");
    /* the userdata first: nothing allocates after the weights are taken */
    void **slot = spk_lua_newobject(L, &demo_type);
    spk_timeline_demo_shape shape;
    shape.cluster = (int)spk_lua_intfield(L, 1, "cluster", 4, 1, 64, "timeline demo");
    shape.batch = spk_lua_intfield(L, 1, "batch", -1, 1, INT32_MAX, "timeline demo");
    shape.steps = spk_lua_intfield(L, 1, "steps", -1, 1, INT32_MAX, "timeline demo");
    spk_lua_rawfield(L, 1, "weights");
    spk_tensor *weights = spk_lua_totensor(L, -1);
    if (!weights)
        return luaL_error(L, "timeline demo.weights must be a tensor [2, 64, 64], got %s", spk_lua_describe(L, -1));
    if (!(*slot = spk_timeline_demo_new(&shape, weights)))
        return spk_lua_fail(L);
    lua_pop(L, 1); /* the weights: the demo holds its own copy on the device */
    return 1;
}

static int demo_forward(lua_State *L)
{
    spk_timeline_selection sel;
    bool timeline = !lua_isnoneornil(L, 3);
    if (timeline)
        spk_lua_read_timeline_selection(L, 3, &sel);
    const spk_tensor *x = spk_lua_checktensor(L, 2);
    spk_timeline_demo *d = spk_lua_checkobject(L, 1, &demo_type);
    spk_tensor *stamps = NULL;
    spk_timeline_clock clock;
    spk_tensor *y = spk_timeline_demo_forward(d, x, timeline ? &sel : NULL, timeline ? &stamps : NULL, &clock);
    if (!y)
        return spk_lua_fail(L);
    spk_lua_pushtensor(L, y);
    if (!timeline)
        return 1;
    spk_lua_pushtensor(L, stamps);
    spk_lua_push_timeline_columns(L, spk_timeline_demo_stages());
    spk_lua_push_timeline_clock(L, &clock);
    return 4;
}

static int demo_time(lua_State *L)
{
    spk_lua_checktensor(L, 2);
    static const char *const builds[] = {"plain", "timeline", NULL};
    bool timeline = spk_lua_checkoption(L, 3, -1, builds, NULL) == 1;
    lua_Integer rounds = luaL_checkinteger(L, 4), warmup = luaL_optinteger(L, 5, 2);
    if (rounds < 1 || rounds > 100000 || warmup < 0 || warmup > 100000)
        return luaL_error(L, "timeline demo time: rounds must be 1 .. 100000 and warmup 0 .. 100000, got %I and %I",
                          rounds, warmup);
    spk_timeline_selection sel;
    bool records = !lua_isnoneornil(L, 6);
    if (records)
        spk_lua_read_timeline_selection(L, 6, &sel);
    double *ms = lua_newuserdatauv(L, sizeof *ms * (size_t)rounds, 0);
    /* taken after the allocation, which may run a finalizer that closes them */
    const spk_tensor *x = spk_lua_checktensor(L, 2);
    spk_timeline_demo *d = spk_lua_checkobject(L, 1, &demo_type);
    if (spk_timeline_demo_time(d, x, timeline, records ? &sel : NULL, (int)rounds, (int)warmup, ms) != 0)
        return spk_lua_fail(L);
    lua_createtable(L, (int)rounds, 0);
    for (lua_Integer i = 0; i < rounds; i++) {
        lua_pushnumber(L, ms[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int demo_info(lua_State *L)
{
    /* a copy: the tables made below may run a finalizer that closes the demo */
    const spk_timeline_demo_geometry g = *spk_timeline_demo_geometry_of(spk_lua_checkobject(L, 1, &demo_type));
    lua_createtable(L, 0, 7);
    spk_lua_setint(L, "cluster", g.blocks / g.tiles);
    spk_lua_setint(L, "hidden", g.hidden);
    spk_lua_setint(L, "threads", g.threads);
    spk_lua_setint(L, "warps", g.threads / 32);
    spk_lua_setint(L, "tile_rows", g.tile_rows);
    spk_lua_setint(L, "tiles", g.tiles);
    spk_lua_setint(L, "blocks", g.blocks);
    return 1;
}

static void demo_tostring(lua_State *L, void *d)
{
    const spk_timeline_demo_geometry g = *spk_timeline_demo_geometry_of(d);
    lua_pushfstring(L, "timeline demo (cluster %d, %d tiles of %d rows)", g.blocks / g.tiles, g.tiles, g.tile_rows);
}

static const spk_lua_checked_reg demo_methods[] = {
    {"forward", demo_forward,
     "demo:forward(x[, selection]) -> y[, stamps, columns, clock]\n"
     "x f32 [batch, steps, 64] on the host or the device; with a selection (0-based: layer, direction,\n"
     "first_step, steps, first_block, blocks, warp) the timeline build records it and the decode comes too.",
     "x, selection"},
    {"time", demo_time,
     "demo:time(x, \"plain\" | \"timeline\", rounds[, warmup[, selection]]) -> {ms, ...}\n"
     "Launches timed by events, after warmup ones: the plain build, or the timeline build recording the\n"
     "selection (none: recording nothing).",
     "x, build, rounds, warmup, selection"},
    {"info", demo_info,
     "demo:info() -> {cluster =, hidden =, threads =, warps =, tile_rows =, tiles =, blocks =}\n"
     "What the shape launches.",
     ""},
    {NULL, NULL, NULL, NULL},
};

static void demo_free(void *d) { spk_timeline_demo_free(d); }

static spk_lua_type demo_type = {.metatable = "spk.timeline_demo", .name = "timeline demo",
    .methods = demo_methods, .free = demo_free, .tostring = demo_tostring,
    .doc = "timeline demo (C): the instrumented cluster recurrence inside spk.timeline.demo's plan (plan.core).",
    .close_doc = "demo:close()\nFrees the demo's device memory now (also <close> and collection).",
};

static const spk_lua_checked_reg module_functions[] = {
    {"timeline_decode", l_decode,
     "spk.core.timeline_decode(raw, stage_names[, cycles_per_ns]) -> stamps, columns, clock\n"
     "A timeline build's raw u64 buffer as f64 [records, columns] on one time base (spk.timeline.decode\n"
     "calls it); cycles_per_ns > 0 aligns with that clock rate instead of the fitted one.",
     "raw, stage_names, cycles_per_ns"},
    {"timeline_columns", l_columns,
     "spk.core.timeline_columns(stage_names) -> {{name =, unit =, about =}, ...}\n"
     "The columns a decode of a kernel with these stages gives.",
     "stage_names"},
    {"timeline_demo_stages", l_demo_stages,
     "spk.core.timeline_demo_stages() -> {names = {...}, waits_for = {...}}\n"
     "The demo kernel's stages and, for each, the stage it waits for (1-based) or false.",
     ""},
    {"timeline_demo_new", l_demo_new,
     "spk.core.timeline_demo_new{cluster =, batch =, steps =, weights =} -> demo\n"
     "The demo kernel's plan (what spk.timeline.demo builds); weights f32 [2, 64, 64].",
     "options"},
    {NULL, NULL, NULL, NULL},
};

void spk_open_timeline(lua_State *L, int module)
{
    spk_lua_newtype(L, &demo_type);
    luaL_getmetatable(L, demo_type.metatable);
    lua_pushliteral(L, "timeline demo"); /* what Lua's own messages call it */
    lua_setfield(L, -2, "__name");
    lua_pop(L, 1);

    spk_lua_register(L, module, module_functions, "spk.core");
    lua_pushinteger(L, SPK_TIMELINE_ARGS); /* the parameters SPK_TIMELINE_PARAMS adds */
    lua_setfield(L, module, "timeline_args");
}
