/* Lua bindings of the comparison metrics: spk.compare(actual, expected) -> a
 * table of metrics that prints readably, spk.allclose(actual, expected,
 * {rtol, atol}) -> boolean. The second is the truth (relative errors are
 * taken against it), as in every comparison of spk. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compare.h"
#include "core/error.h"
#include "cuda/runtime.h"
#include "lua/tensor_area.h"

#define COMPARISON_MT "spk.comparison"

static double number_field(lua_State *L, int idx, const char *key)
{
    spk_lua_rawfield(L, idx, key);
    double v = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : 0.0;
    lua_pop(L, 1);
    return v;
}

/* "max_abs 1.19e-07  max_rel ...  worst [2, 3]: a 1.0000001 b 1" */
static int comparison_tostring(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    char text[512];
    snprintf(text, sizeof text, "max_abs %.6g  max_rel %.6g  rel_l2 %.6g  max_ulp %.6g", number_field(L, 1, "max_abs"),
             number_field(L, 1, "max_rel"), number_field(L, 1, "rel_l2"), number_field(L, 1, "max_ulp"));
    luaL_addstring(&b, text);
    spk_lua_rawfield(L, 1, "worst");
    if (lua_type(L, -1) == LUA_TTABLE && lua_rawlen(L, -1) > 0) {
        luaL_addstring(&b, "  worst [");
        lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, -1, i);
            snprintf(text, sizeof text, "%s%lld", i > 1 ? ", " : "", (long long)lua_tointeger(L, -1));
            lua_pop(L, 1);
            luaL_addstring(&b, text);
        }
        snprintf(text, sizeof text, "]: a %.9g b %.9g", number_field(L, 1, "a_worst"), number_field(L, 1, "b_worst"));
        luaL_addstring(&b, text);
    }
    lua_pop(L, 1);
    snprintf(text, sizeof text, "  nan_mismatch %.0f  inf_mismatch %.0f  count %.0f", number_field(L, 1, "nan_mismatch"),
             number_field(L, 1, "inf_mismatch"), number_field(L, 1, "count"));
    luaL_addstring(&b, text);
    luaL_pushresult(&b);
    return 1;
}

static void set_number(lua_State *L, const char *key, double v)
{
    lua_pushnumber(L, v);
    lua_setfield(L, -2, key);
}

static void set_integer(lua_State *L, const char *key, int64_t v)
{
    lua_pushinteger(L, (lua_Integer)v);
    lua_setfield(L, -2, key);
}

/* spk.compare(a, b): {max_abs, max_rel, rel_l2, max_ulp, worst = {1-based
 * index of the max_abs element}, a_worst, b_worst, nan_mismatch,
 * inf_mismatch, count}. worst is empty (and a_worst, b_worst nil) when no
 * finite pair exists. */
static int module_compare(lua_State *L)
{
    spk_tensor *a = spk_lua_checktensor(L, 1);
    spk_tensor *b = spk_lua_checktensor(L, 2);
    spk_comparison c;
    if (spk_compare(a, b, &c) != 0)
        return spk_lua_fail(L);
    int n = c.worst_flat >= 0 ? a->ndim : 0; /* before any allocation: a finalizer may close a */
    lua_createtable(L, 0, 10);
    set_number(L, "max_abs", c.max_abs);
    set_number(L, "max_rel", c.max_rel);
    set_number(L, "rel_l2", c.rel_l2);
    set_number(L, "max_ulp", c.max_ulp);
    lua_createtable(L, n, 0);
    for (int d = 0; d < n; d++) {
        lua_pushinteger(L, (lua_Integer)c.worst[d] + 1);
        lua_rawseti(L, -2, d + 1);
    }
    lua_setfield(L, -2, "worst");
    if (c.worst_flat >= 0) {
        set_number(L, "a_worst", c.a_worst);
        set_number(L, "b_worst", c.b_worst);
    }
    set_integer(L, "nan_mismatch", c.nan_mismatch);
    set_integer(L, "inf_mismatch", c.inf_mismatch);
    set_integer(L, "count", c.count);
    luaL_setmetatable(L, COMPARISON_MT);
    return 1;
}

static const char *const allclose_options[] = {"rtol", "atol", NULL};

/* spk.allclose(a, b[, {rtol = 1e-5, atol = 1e-8}]), NumPy's defaults. */
static int module_allclose(lua_State *L)
{
    spk_lua_checktensor(L, 1); /* arguments in order, the options read before the tensors are taken */
    spk_lua_checktensor(L, 2);
    spk_lua_checkoptions(L, 3, allclose_options);
    double rtol = spk_lua_optfield_number(L, 3, "rtol", 1e-5);
    double atol = spk_lua_optfield_number(L, 3, "atol", 1e-8);
    spk_tensor *a = spk_lua_checktensor(L, 1);
    spk_tensor *b = spk_lua_checktensor(L, 2);
    bool close;
    if (spk_allclose(a, b, rtol, atol, &close) != 0)
        return spk_lua_fail(L);
    lua_pushboolean(L, close);
    return 1;
}

/* spk.digest(t) -> the SHA-256, as 64 hex digits, of t's dtype, shape and
 * values in row-major order: equal for tensors of equal content (views and
 * copies alike), different after any change of a value. What caches of
 * results key on. */
static int module_digest(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    if (!spk_tensor_is_host(t))
        return luaL_error(L, "spk.digest: a host tensor (this one is on a device; :cpu() copies it)");
    char head[32 + 21 * SPK_MAX_DIMS];
    int n = snprintf(head, sizeof head, "spk.digest 1 %s %d", spk_dtype_name(t->dtype), t->ndim);
    for (int d = 0; d < t->ndim; d++)
        n += snprintf(head + n, sizeof head - (size_t)n, " %lld", (long long)t->shape[d]);
    head[n++] = '\n';
    spk_tensor *c = spk_tensor_contiguous(t);
    size_t bytes = c ? (size_t)spk_tensor_numel(c) * spk_dtype_size(c->dtype) : 0;
    uint8_t *buf = c ? malloc((size_t)n + bytes) : NULL;
    if (!buf) {
        spk_tensor_free(c);
        return luaL_error(L, "spk.digest: %s", c ? "out of memory" : spk_last_error());
    }
    memcpy(buf, head, (size_t)n);
    if (bytes)
        memcpy(buf + n, spk_tensor_data(c), bytes);
    spk_tensor_free(c);
    uint8_t digest[32];
    spk_sha256(buf, (size_t)n + bytes, digest);
    free(buf);
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    lua_pushlstring(L, hex, 64);
    return 1;
}

static const spk_lua_checked_reg module_functions[] = {
    {"digest", module_digest,
     "spk.digest(t) -> 64 hex digits\n"
     "SHA-256 of t's dtype, shape and values in row-major order (a host tensor): equal for equal content, views\n"
     "and copies alike, and different once a value changes. What caches of results key on.",
     "t"},
    {"compare", module_compare,
     "spk.compare(actual, expected) -> {max_abs, max_rel, rel_l2, max_ulp, worst, a_worst, b_worst,\n"
     "                                  nan_mismatch, inf_mismatch, count}\n"
     "Metrics of actual against the truth expected (same shape, host; actual first, as in every comparison\n"
     "of spk): rel_l2 = ||actual - expected|| / ||expected||, max_ulp in the less precise dtype, worst = the\n"
     "1-based index of the largest difference, a_worst and b_worst the two values there. Prints as one line.",
     "actual, expected"},
    {"allclose", module_allclose,
     "spk.allclose(actual, expected[, {rtol = 1e-5, atol = 1e-8}]) -> boolean\n"
     "Whether |actual - expected| <= atol + rtol * |expected| everywhere (NaN matches NaN), as NumPy's\n"
     "allclose(a, b).",
     "actual, expected, options"},
    {NULL, NULL, NULL, NULL},
};

void spk_open_compare(lua_State *L, int module)
{
    luaL_newmetatable(L, COMPARISON_MT);
    lua_pushcfunction(L, comparison_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);

    spk_lua_register(L, module, module_functions, NULL);
}
