/* Lua bindings of the seeded generator (core/rng.h documents the algorithm).
 *
 * spk.rand / spk.randn with {seed = n} draw from a generator seeded with n,
 * so the same call gives the same numbers everywhere. Without a seed they
 * continue the process-wide generator (one per Lua state, kept in the
 * registry), seeded with SPK_RNG_DEFAULT_SEED when spk loads and again by
 * spk.seed(n): each call gets new numbers, and a run is reproduced by its
 * seed (spk.initial_seed(), which results files record); spk.next_seed() is
 * its next output, the seed of a seeded routine called without one. spk.generator(seed)
 * is a "spk.generator" userdata of one's own whose :uniform, :normal and
 * :next_u64 continue from where the previous call stopped. */
#include "core/error.h"
#include "core/rng.h"
#include "lua/tensor_area.h"

#define GENERATOR_MT "spk.generator"

static const char *const rand_options[] = {"seed", "dtype", "low", "high", NULL};
static const char *const randn_options[] = {"seed", "dtype", "mean", "std", NULL};
static const char *const uniform_options[] = {"dtype", "low", "high", NULL};
static const char *const normal_options[] = {"dtype", "mean", "std", NULL};

/* Seeds are 64-bit: a negative Lua integer stands for its two's complement. */
static uint64_t check_seed(lua_State *L, int arg)
{
    int isint = 0;
    lua_Integer seed = lua_tointegerx(L, arg, &isint);
    if (!isint || lua_type(L, arg) != LUA_TNUMBER)
        luaL_argerror(L, arg, lua_pushfstring(L, "seed must be an integer, got %s", spk_lua_describe(L, arg)));
    return (uint64_t)seed;
}

/* The process-wide generator and the seed it was last seeded with. */
typedef struct process_rng {
    spk_rng rng;
    uint64_t seed;
} process_rng;

static const char process_rng_key = 0; /* its registry slot: this address */

static process_rng *process_generator(lua_State *L)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &process_rng_key);
    process_rng *p = lua_touserdata(L, -1);
    lua_pop(L, 1);
    if (!p) { /* made when spk loads (spk_open_random); this is a safety net */
        p = lua_newuserdatauv(L, sizeof *p, 0);
        spk_rng_seed(&p->rng, SPK_RNG_DEFAULT_SEED);
        p->seed = SPK_RNG_DEFAULT_SEED;
        lua_rawsetp(L, LUA_REGISTRYINDEX, &process_rng_key);
    }
    return p;
}

/* Whether the options table at arg gives a seed, and which. */
static bool opt_seed_field(lua_State *L, int arg, uint64_t *out)
{
    if (lua_type(L, arg) != LUA_TTABLE)
        return false;
    spk_lua_rawfield(L, arg, "seed");
    uint64_t seed = 0;
    bool given = !lua_isnil(L, -1);
    if (given) {
        int isint = 0;
        lua_Integer v = lua_tointegerx(L, -1, &isint);
        if (!isint || lua_type(L, -1) != LUA_TNUMBER)
            luaL_argerror(L, arg, lua_pushfstring(L, "option 'seed' must be an integer, got %s",
                                                  spk_lua_describe(L, -1)));
        seed = (uint64_t)v;
    }
    lua_pop(L, 1);
    *out = seed;
    return given;
}

/* Reads (shape..., opts) from `arg` on, creates the tensor and fills it.
 * The distribution's parameters are checked by the core (core/rng.h); its
 * message becomes an error against the options argument. */
static int draw(lua_State *L, spk_rng *rng, int arg, bool normal, const char *const *known, const char *what)
{
    int ndim;
    int64_t shape[SPK_MAX_DIMS];
    int opts = spk_lua_checkshape(L, arg, &ndim, shape, false);
    spk_lua_check_end(L, opts + 1);
    spk_lua_checkoptions(L, opts, known);
    spk_dtype dtype = spk_lua_optfield_dtype(L, opts, SPK_F32);
    if (dtype != SPK_F32 && dtype != SPK_F64)
        luaL_argerror(L, opts, lua_pushfstring(L, "%s makes f32 or f64 tensors, not %s", what,
                                               spk_dtype_name(dtype)));
    double a = spk_lua_optfield_number(L, opts, normal ? "mean" : "low", 0.0);
    double b = spk_lua_optfield_number(L, opts, normal ? "std" : "high", 1.0);
    if ((normal ? spk_rng_normal_check(a, b) : spk_rng_uniform_check(a, b)) != 0)
        luaL_argerror(L, opts, lua_pushfstring(L, "%s", spk_last_error()));
    spk_rng fresh;
    uint64_t seed;
    if (!rng && opt_seed_field(L, opts, &seed)) {
        spk_rng_seed(&fresh, seed);
        rng = &fresh;
    } else if (!rng) {
        rng = &process_generator(L)->rng;
    }
    spk_lua_pushtensor(L, spk_tensor_new(dtype, ndim, shape));
    spk_tensor *t = spk_lua_checktensor(L, -1);
    if ((normal ? spk_rng_fill_normal(rng, t, a, b) : spk_rng_fill_uniform(rng, t, a, b)) != 0)
        return spk_lua_fail(L);
    return 1;
}

/* spk.rand(shape, {seed = 0, dtype = "f32", low = 0, high = 1}) */
static int module_rand(lua_State *L) { return draw(L, NULL, 1, false, rand_options, "rand"); }
/* spk.randn(shape, {seed = 0, dtype = "f32", mean = 0, std = 1}) */
static int module_randn(lua_State *L) { return draw(L, NULL, 1, true, randn_options, "randn"); }

static int module_seed(lua_State *L)
{
    uint64_t seed = check_seed(L, 1);
    process_rng *p = process_generator(L);
    spk_rng_seed(&p->rng, seed);
    p->seed = seed;
    return 0;
}

static int module_next_seed(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)spk_rng_next(&process_generator(L)->rng));
    return 1;
}

static int module_initial_seed(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)process_generator(L)->seed);
    return 1;
}

static int module_generator(lua_State *L)
{
    uint64_t seed = lua_isnoneornil(L, 1) ? 0 : check_seed(L, 1);
    spk_rng *rng = lua_newuserdatauv(L, sizeof *rng, 0);
    spk_rng_seed(rng, seed);
    luaL_setmetatable(L, GENERATOR_MT);
    return 1;
}

static spk_rng *check_generator(lua_State *L, int arg) { return spk_lua_checkudata(L, arg, GENERATOR_MT, "generator"); }

static int generator_uniform(lua_State *L)
{
    return draw(L, check_generator(L, 1), 2, false, uniform_options, "uniform");
}

static int generator_normal(lua_State *L)
{
    return draw(L, check_generator(L, 1), 2, true, normal_options, "normal");
}

/* The next raw 64-bit output; values above 2^63 read as negative Lua
 * integers (compare them with math.ult). */
static int generator_next_u64(lua_State *L)
{
    spk_rng *rng = check_generator(L, 1);
    lua_pushinteger(L, (lua_Integer)spk_rng_next(rng));
    return 1;
}

static int generator_tostring(lua_State *L)
{
    lua_pushfstring(L, "generator (%p)", (void *)check_generator(L, 1));
    return 1;
}

static const spk_lua_checked_reg generator_methods[] = {
    {"uniform", generator_uniform,
     "g:uniform(shape[, {dtype = \"f32\", low = 0, high = 1}]) -> tensor\n"
     "The next draws of g, uniform in [low, high); shape is {2, 3} or 2, 3.",
     "shape..., options"},
    {"normal", generator_normal,
     "g:normal(shape[, {dtype = \"f32\", mean = 0, std = 1}]) -> tensor\n"
     "The next draws of g, normal (Box-Muller); shape is {2, 3} or 2, 3.",
     "shape..., options"},
    {"next_u64", generator_next_u64,
     "g:next_u64() -> integer\nThe next raw 64-bit output (above 2^63 it reads negative: compare with math.ult).",
     ""},
    {NULL, NULL, NULL, NULL},
};

static const spk_lua_checked_reg module_functions[] = {
    {"rand", module_rand,
     "spk.rand(shape[, {seed =, dtype = \"f32\", low = 0, high = 1}]) -> tensor\n"
     "Uniform in [low, high). With seed: from a generator seeded with it (the same numbers every call and\n"
     "run); without: the next draws of the process-wide generator (seeded with 0 when spk loads, and by\n"
     "spk.seed(n)). The algorithm: SplitMix64-seeded xoshiro256**, src/core/rng.h.",
     "shape..., options"},
    {"randn", module_randn,
     "spk.randn(shape[, {seed =, dtype = \"f32\", mean = 0, std = 1}]) -> tensor\n"
     "Normal draws (Box-Muller). With seed: from a generator seeded with it; without: the next draws of the\n"
     "process-wide generator (seeded with 0 when spk loads, and by spk.seed(n)).",
     "shape..., options"},
    {"seed", module_seed,
     "spk.seed(n)\n"
     "Seeds the process-wide generator that spk.rand and spk.randn without a seed draw from (as\n"
     "torch.manual_seed): the next draws are those of {seed = n}. It starts seeded with 0.",
     "n"},
    {"next_seed", module_next_seed,
     "spk.next_seed() -> integer\n"
     "The next raw 64-bit output of the process-wide generator: the seed spk.lstm.random takes when it is\n"
     "given none, so that it too gives new weights each call and a run is reproduced by spk.seed(n).",
     ""},
    {"initial_seed", module_initial_seed,
     "spk.initial_seed() -> integer\n"
     "The seed the process-wide generator was last seeded with (0 until spk.seed; results files record it).",
     ""},
    {"generator", module_generator,
     "spk.generator([seed = 0]) -> generator\n"
     "A seeded generator (SplitMix64-seeded xoshiro256**) whose :uniform, :normal and :next_u64 continue\n"
     "where the previous call stopped.",
     "seed"},
    {NULL, NULL, NULL, NULL},
};

static const spk_lua_self generator_self = {"generator", NULL};

void spk_open_random(lua_State *L, int module)
{
    luaL_newmetatable(L, GENERATOR_MT);
    lua_pushliteral(L, "generator"); /* for Lua's own messages ("got generator") */
    lua_setfield(L, -2, "__name");
    lua_pushcfunction(L, generator_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_newtable(L);
    spk_lua_setfuncs_checked(L, generator_methods, &generator_self);
    spk_lua_settype(L, GENERATOR_MT, -1,
                    "generator: a seeded random stream (spk.generator(seed)); each draw continues the stream.");
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);

    spk_lua_register(L, module, module_functions, NULL);

    process_rng *p = lua_newuserdatauv(L, sizeof *p, 0);
    spk_rng_seed(&p->rng, SPK_RNG_DEFAULT_SEED);
    p->seed = SPK_RNG_DEFAULT_SEED;
    lua_rawsetp(L, LUA_REGISTRYINDEX, &process_rng_key);
}
