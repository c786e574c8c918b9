/* Lua bindings of cuBLAS products (src/cuda/runtime.h: spk_gemm): spk.core.blas.
 * lua/spk/cuda.lua makes them spk.blas. */
#include "cuda/runtime.h"
#include "lua/areas.h"
#include "lua/cuda_area.h"

static spk_tensor *field_tensor(lua_State *L, int idx, const char *key)
{
    spk_lua_rawfield(L, idx, key);
    spk_tensor *t = spk_lua_totensor(L, -1);
    if (!t)
        luaL_error(L, "gemm: %s must be a tensor, got %s", key, luaL_typename(L, -1));
    lua_pop(L, 1); /* still referenced by the options table */
    return t;
}

static double opt_number_field(lua_State *L, int idx, const char *key, double fallback)
{
    spk_lua_rawfield(L, idx, key);
    double v = lua_isnil(L, -1) ? fallback : luaL_checknumber(L, -1);
    lua_pop(L, 1);
    return v;
}

/* The tensor in field `key`, or NULL where it is nil. */
static spk_tensor *opt_field_tensor(lua_State *L, int idx, const char *key)
{
    spk_lua_rawfield(L, idx, key);
    spk_tensor *t = NULL;
    if (!lua_isnil(L, -1) && !(t = spk_lua_totensor(L, -1)))
        luaL_error(L, "gemm: %s must be a tensor, got %s", key, luaL_typename(L, -1));
    lua_pop(L, 1); /* still referenced by the options table */
    return t;
}

static const char *const gemm_options[] = {"a", "b", "b_lo", "b16", "a_exponent", "c", "transa", "transb", "alpha",
                                           "beta", "math", "stream", NULL};
static const char *const parts_options[] = {"hi", "lo", "exponent", NULL};

/* Field b16 of the options at argument 1: {hi =, lo =, exponent =}, B's FP16
 * parts (spk.blas.split_f16); false where it is nil. */
static bool read_f16_parts(lua_State *L, spk_f16_parts *parts)
{
    spk_lua_rawfield(L, 1, "b16");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return false;
    }
    if (!lua_istable(L, -1))
        luaL_error(L, "gemm: b16 must be a table {hi =, lo =, exponent =}, got %s", luaL_typename(L, -1));
    int t = lua_gettop(L);
    spk_lua_checkkeys(L, t, parts_options, "gemm b16");
    parts->hi = field_tensor(L, t, "hi");
    parts->lo = field_tensor(L, t, "lo");
    spk_lua_rawfield(L, t, "exponent");
    if (!lua_isinteger(L, -1))
        luaL_error(L, "gemm: b16.exponent must be an integer, got %s", luaL_typename(L, -1));
    parts->exponent = (int)lua_tointeger(L, -1);
    lua_pop(L, 2);
    return true;
}

/* The options at argument 1: a, b, b_lo, c and the transposes (the raw readers
 * make no allocation: the pointers stay valid). */
static spk_gemm_args read_operands(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    spk_lua_checkkeys(L, 1, gemm_options, "gemm");
    spk_gemm_args g = {0};
    g.a = field_tensor(L, 1, "a");
    g.b = field_tensor(L, 1, "b");
    g.b_lo = opt_field_tensor(L, 1, "b_lo");
    g.c = field_tensor(L, 1, "c");
    g.transa = spk_lua_boolfield(L, 1, "transa", "gemm");
    g.transb = spk_lua_boolfield(L, 1, "transb", "gemm");
    return g;
}


static int l_gemm(lua_State *L)
{
    spk_gemm_args g = read_operands(L);
    g.alpha = (float)opt_number_field(L, 1, "alpha", 1.0);
    g.beta = (float)opt_number_field(L, 1, "beta", 0.0);
    spk_lua_rawfield(L, 1, "math");
    g.math = (spk_math_mode)spk_lua_checkoption(L, -1, SPK_MATH_FP32, spk_math_mode_names, "gemm.math");
    lua_pop(L, 1);
    g.stream = spk_lua_fieldstream(L, 1, "stream", NULL);
    spk_f16_parts parts;
    const bool b16 = read_f16_parts(L, &parts);
    spk_lua_rawfield(L, 1, "a_exponent");
    if (!b16 && !lua_isnil(L, -1))
        luaL_error(L, "gemm: a_exponent scales a for b16's FP16 parts; give b16 too, or leave a_exponent out");
    lua_Integer a_exponent = lua_isnil(L, -1) ? 0 : luaL_checkinteger(L, -1);
    lua_pop(L, 1);
    if (b16) {
        a_exponent = a_exponent < -1000 ? -1000 : a_exponent > 1000 ? 1000 : a_exponent; /* refused past ±100 */
        spk_lua_check(L, spk_gemm_3xf16(&g, &parts, (int)a_exponent));
        return 0;
    }
    spk_lua_check(L, spk_gemm(&g));
    return 0;
}

/* spk.blas.gemm_check{...} -> m, n, k, count: the shape checks alone (no GPU). */
static int l_gemm_check(lua_State *L)
{
    spk_gemm_args g = read_operands(L);
    int64_t m, n, k, count;
    spk_lua_check(L, spk_gemm_check(&g, &m, &n, &k, &count));
    lua_pushinteger(L, m);
    lua_pushinteger(L, n);
    lua_pushinteger(L, k);
    lua_pushinteger(L, count);
    return 4;
}

/* spk.blas.split_tf32(x[, stream]) -> hi, lo: x = hi + lo in TF32 parts. */
static int l_split_tf32(lua_State *L)
{
    spk_lua_checktensor(L, 1); /* arguments in order; the pointer taken after the stream's check */
    spk_stream *s = spk_lua_optstream(L, 2);
    spk_tensor *x = spk_lua_checktensor(L, 1);
    spk_tensor *hi, *lo;
    spk_lua_check(L, spk_tf32_split(x, &hi, &lo, s));
    spk_lua_pushtensor(L, hi);
    spk_lua_pushtensor(L, lo);
    return 2;
}

/* spk.blas.split_f16(x[, stream]) -> hi, lo, exponent: x 2^exponent = hi + lo in FP16 parts. */
static int l_split_f16(lua_State *L)
{
    spk_tensor *x = spk_lua_checktensor(L, 1);
    spk_stream *s = spk_lua_optstream(L, 2);
    spk_f16_parts parts;
    spk_lua_check(L, spk_f16_split(x, &parts, s));
    spk_lua_pushtensor(L, parts.hi);
    spk_lua_pushtensor(L, parts.lo);
    lua_pushinteger(L, parts.exponent);
    return 3;
}

/* spk.blas.f16_scale_exponent(max_abs) -> s: the power of two of the FP16 parts' rule. */
static int l_f16_scale_exponent(lua_State *L)
{
    lua_pushinteger(L, spk_f16_exponent_of((float)luaL_checknumber(L, 1)));
    return 1;
}

static const spk_lua_checked_reg functions[] = {
    {"gemm", l_gemm, "spk.blas.gemm{a =, b =, c =, ...}", "options"}, /* its doc: gemm_doc */
    {"split_tf32", l_split_tf32,
     "spk.blas.split_tf32(x[, stream]) -> hi, lo\n"
     "x = hi + lo with both parts TF32 (hi x rounded, lo the rest rounded), new f32 tensors of x's shape\n"
     "on x's side (x contiguous, host or device): the b and b_lo of spk.blas.gemm's split form.",
     "x, stream"},
    {"split_f16", l_split_f16,
     "spk.blas.split_f16(x[, stream]) -> hi, lo, exponent\n"
     "x 2^exponent = hi + lo with both parts FP16 (hi rounded, lo the rest rounded), the exponent putting the\n"
     "largest finite |x| in [2^14, 2^15): FP16 bits two to an i32 ([..., k / 2] of x's [..., k]), on x's side\n"
     "(x contiguous, its last dimension even): the b16 = {hi =, lo =, exponent =} of spk.blas.gemm.",
     "x, stream"},
    {"f16_scale_exponent", l_f16_scale_exponent,
     "spk.blas.f16_scale_exponent(max_abs) -> s\n"
     "The power of two that puts a largest magnitude max_abs in [2^14, 2^15) (0 for 0 or a non-finite one),\n"
     "as split_f16 scales its parts: gemm's a_exponent for an a of that largest magnitude.",
     "max_abs"},
    {"gemm_check", l_gemm_check,
     "spk.blas.gemm_check{a =, b =, c =, transa =, transb =} -> m, n, k, count\n"
     "The shape checks of spk.blas.gemm alone (no GPU needed).",
     "options"},
    {NULL, NULL, NULL, NULL}};

/* gemm's doc, its maths from the one list (cuda/math_modes.h). */
static void set_gemm_doc(lua_State *L, int table)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "spk.blas.gemm{a =, b =, c =, transa = false, transb = false, alpha = 1, beta = 0, math = ");
    for (int i = 0; i < SPK_MATH_COUNT; i++) {
        luaL_addstring(&b, i ? " | \"" : "\"");
        luaL_addstring(&b, spk_math_mode_names[i]);
        luaL_addchar(&b, '"');
    }
    luaL_addstring(&b, ",\n              b_lo =, b16 =, a_exponent =, stream =}\n"
                       "c = alpha * op(a) * op(b) + beta * c on device f32 tensors (cuBLAS; 3xtf32: spk's own kernel).\n"
                       "A 3-d c [count, m, n] is a batch of count products in one launch; a and b are each count\n"
                       "matrices or one shared by all. b_lo (math 3xtf32): b and b_lo are b's parts from\n"
                       "spk.blas.split_tf32, run on the TMA kernel (compute capability 9.0). b16 = {hi =, lo =,\n"
                       "exponent =} (math 3xtf32): b's FP16 parts from spk.blas.split_f16 (b contiguous, k a\n"
                       "multiple of 8), a scaled by 2^a_exponent before its split (|a| 2^a_exponent below 65,520:\n"
                       "spk.blas.f16_scale_exponent(max |a|); an infinite a gives NaN), on the TMA kernel's FP16\n"
                       "form. The maths:");
    for (int i = 0; i < SPK_MATH_COUNT; i++) {
        luaL_addstring(&b, "\n  ");
        luaL_addstring(&b, spk_math_mode_names[i]);
        luaL_addstring(&b, ": ");
        luaL_addstring(&b, spk_math_mode_help((spk_math_mode)i));
    }
    luaL_pushresult(&b);
    spk_lua_rawfield(L, table, "gemm");
    spk_lua_setdoc(L, -1, lua_tostring(L, -2));
    lua_pop(L, 2);
}

void spk_open_blas(lua_State *L, int module)
{
    lua_newtable(L);
    spk_lua_setfuncs_module(L, functions, "spk.blas");
    set_gemm_doc(L, lua_gettop(L));
    lua_createtable(L, SPK_MATH_COUNT, 0);
    for (int i = 0; i < SPK_MATH_COUNT; i++) {
        unsigned where = spk_math_mode_where((spk_math_mode)i);
        lua_createtable(L, 0, 5);
        spk_lua_setstring(L, "name", spk_math_mode_names[i]);
        spk_lua_setbool(L, "stacks", (where & SPK_MATH_STACKS) != 0);
        spk_lua_setbool(L, "cudnn", (where & SPK_MATH_CUDNN) != 0);
        spk_lua_setstring(L, "held_to", spk_math_mode_name(spk_math_mode_held_to((spk_math_mode)i)));
        spk_lua_setstring(L, "help", spk_math_mode_help((spk_math_mode)i));
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "math_modes");
    lua_setfield(L, module, "blas");
}
