/* Lua bindings of host tensors: the "spk.tensor" userdata (in the style of
 * Lua's liolib.c: a methods table reached through __index, and one idempotent
 * release shared by __gc, __close and t:close()), and the constructors.
 *
 * Lua is 1-based: dims, indices, narrow starts and slice bounds given from Lua
 * are translated here before the 0-based C core sees them. Arguments are
 * checked here so errors name the argument (luaL_argerror); failures inside
 * the core are raised with spk_last_error(). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "lua/tensor_area.h"

#define TENSOR_METHODS_KEY "spk.tensor.methods"
/* tostring(t) prints every element up to this many, then summarises with
 * "..." keeping FORMAT_EDGE items at each end of every dim. */
#define FORMAT_THRESHOLD 1000
#define FORMAT_EDGE 3

/* ---- shared helpers (bind.h, tensor_area.h) ---- */

int spk_lua_fail(lua_State *L)
{
    const char *msg = spk_last_error();
    return luaL_error(L, "%s", *msg ? msg : "unknown error");
}

spk_tensor *spk_lua_totensor(lua_State *L, int idx)
{
    spk_lua_tensor *u = luaL_testudata(L, idx, SPK_TENSOR_MT);
    return u ? u->t : NULL;
}

spk_tensor *spk_lua_checktensor(lua_State *L, int idx)
{
    spk_lua_tensor *u = luaL_checkudata(L, idx, SPK_TENSOR_MT);
    if (!u->t)
        luaL_argerror(L, idx, "tensor is closed");
    return u->t;
}

void spk_lua_pushtensor(lua_State *L, spk_tensor *t)
{
    if (!t)
        spk_lua_fail(L);
    spk_lua_tensor *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->t = t;
    luaL_setmetatable(L, SPK_TENSOR_MT);
}

void spk_lua_push_tensor_methods(lua_State *L)
{
    if (spk_lua_rawfield(L, LUA_REGISTRYINDEX, TENSOR_METHODS_KEY) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_setfield(L, LUA_REGISTRYINDEX, TENSOR_METHODS_KEY);
    }
}

spk_dtype spk_lua_optdtype(lua_State *L, int arg, spk_dtype fallback)
{
    if (lua_isnoneornil(L, arg))
        return fallback;
    if (lua_type(L, arg) != LUA_TSTRING)
        luaL_typeerror(L, arg, "dtype name");
    const char *name = lua_tostring(L, arg);
    spk_dtype dtype;
    if (spk_dtype_from_name(name, &dtype) != 0)
        luaL_argerror(L, arg, lua_pushfstring(L, "unknown dtype '%s' (expected f32, f64, i32 or u64)", name));
    return dtype;
}

static int64_t shape_entry(lua_State *L, int arg, int pos, int entry, bool allow_infer)
{
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, pos, &isint);
    if (!isint)
        luaL_argerror(L, arg, lua_pushfstring(L, "shape entry %d must be an integer, got %s", entry,
                                              luaL_typename(L, pos)));
    if (v < 0 && !(allow_infer && v == -1))
        luaL_argerror(L, arg, lua_pushfstring(L, "shape entry %d is negative (%I)", entry, v));
    return (int64_t)v;
}

/* Shape from a table at `arg`, or from integer arguments arg..last. */
static int read_shape(lua_State *L, int arg, int last, int *ndim, int64_t *shape, bool allow_infer)
{
    int n = 0;
    if (lua_type(L, arg) == LUA_TTABLE) {
        lua_Integer len = (lua_Integer)lua_rawlen(L, arg);
        if (len > SPK_MAX_DIMS)
            luaL_argerror(L, arg, lua_pushfstring(L, "shape has %I dims, at most %d are supported", len,
                                                  SPK_MAX_DIMS));
        lua_Integer entries = 0;
        lua_pushnil(L);
        while (lua_next(L, arg)) {
            lua_pop(L, 1);
            entries++;
        }
        if (entries != len)
            luaL_argerror(L, arg, "shape table must be a list of integers (it has other keys)");
        for (lua_Integer i = 1; i <= len; i++) {
            lua_rawgeti(L, arg, i);
            shape[n++] = shape_entry(L, arg, lua_gettop(L), (int)i, allow_infer);
            lua_pop(L, 1);
        }
        *ndim = n;
        return arg + 1;
    }
    int a = arg;
    for (; a <= last && lua_type(L, a) == LUA_TNUMBER; a++) {
        if (n == SPK_MAX_DIMS)
            luaL_argerror(L, a, lua_pushfstring(L, "shape has more than %d dims", SPK_MAX_DIMS));
        shape[n] = shape_entry(L, a, a, n + 1, allow_infer);
        n++;
    }
    if (a == arg && !lua_isnoneornil(L, arg) && lua_type(L, arg) != LUA_TSTRING)
        luaL_typeerror(L, arg, "shape (table or integers)");
    *ndim = n;
    return a;
}

int spk_lua_checkshape(lua_State *L, int arg, int *ndim, int64_t *shape, bool allow_infer)
{
    return read_shape(L, arg, lua_gettop(L), ndim, shape, allow_infer);
}

bool spk_lua_checkoptions(lua_State *L, int arg, const char *const *known)
{
    if (lua_isnoneornil(L, arg))
        return false;
    luaL_checktype(L, arg, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, arg)) {
        lua_pop(L, 1);
        bool ok = false;
        if (lua_type(L, -1) == LUA_TSTRING)
            for (const char *const *k = known; *k && !ok; k++)
                ok = strcmp(*k, lua_tostring(L, -1)) == 0;
        if (!ok) {
            luaL_Buffer b;
            luaL_buffinit(L, &b);
            for (const char *const *k = known; *k; k++) {
                if (k != known)
                    luaL_addstring(&b, ", ");
                luaL_addstring(&b, *k);
            }
            luaL_pushresult(&b);
            luaL_argerror(L, arg, lua_pushfstring(L, "unknown option %s (known: %s)",
                                                  spk_lua_describe(L, -2), lua_tostring(L, -1)));
        }
    }
    return true;
}

double spk_lua_optfield_number(lua_State *L, int arg, const char *key, double fallback)
{
    if (lua_type(L, arg) != LUA_TTABLE)
        return fallback;
    spk_lua_rawfield(L, arg, key);
    double v = fallback;
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TNUMBER)
            luaL_argerror(L, arg, lua_pushfstring(L, "option '%s' must be a number, got %s", key,
                                                  luaL_typename(L, -1)));
        v = lua_tonumber(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

spk_dtype spk_lua_optfield_dtype(lua_State *L, int arg, spk_dtype fallback)
{
    if (lua_type(L, arg) != LUA_TTABLE)
        return fallback;
    spk_lua_rawfield(L, arg, "dtype");
    spk_dtype dtype = fallback;
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TSTRING || spk_dtype_from_name(lua_tostring(L, -1), &dtype) != 0)
            luaL_argerror(L, arg, lua_pushfstring(L, "option 'dtype' must be f32, f64, i32 or u64, got %s",
                                                  spk_lua_describe(L, -1)));
    }
    lua_pop(L, 1);
    return dtype;
}

/* ---- argument checks that translate 1-based Lua to 0-based C ---- */

/* A dim: 1..ndim, or -ndim..-1 counting from the last. */
static int check_dim(lua_State *L, int arg, const spk_tensor *t)
{
    lua_Integer d = luaL_checkinteger(L, arg);
    if (t->ndim == 0)
        luaL_argerror(L, arg, "a 0-d tensor has no dims");
    if (d < 0)
        d += t->ndim + 1;
    if (d < 1 || d > t->ndim)
        luaL_argerror(L, arg, lua_pushfstring(L, "dim %I out of range 1..%d", luaL_checkinteger(L, arg), t->ndim));
    return (int)d - 1;
}

/* A 1-based index into dim `dim`; returns it 0-based. */
static int64_t check_index(lua_State *L, int arg, const spk_tensor *t, int dim, const char *what)
{
    lua_Integer i = luaL_checkinteger(L, arg);
    if (i < 1 || i > t->shape[dim])
        luaL_argerror(L, arg, lua_pushfstring(L, "%s %I out of range 1..%I for dim %d of size %I", what, i,
                                              (lua_Integer)t->shape[dim], dim + 1, (lua_Integer)t->shape[dim]));
    return (int64_t)i - 1;
}

/* Exactly ndim 1-based indices starting at `arg`. */
static void check_indices(lua_State *L, int arg, const spk_tensor *t, int nargs, int64_t *idx)
{
    if (nargs != t->ndim)
        luaL_error(L, "expected %d indices for a %d-d tensor, got %d", t->ndim, t->ndim, nargs);
    for (int d = 0; d < t->ndim; d++)
        idx[d] = check_index(L, arg + d, t, d, "index");
}

static void require_host(lua_State *L, const spk_tensor *t, const char *what)
{
    if (!spk_tensor_is_host(t))
        luaL_error(L, "%s: the tensor is on cuda:%d; copy it to the host with t:cpu() first", what,
                   t->storage->device);
}

static bool dtype_is_integer(spk_dtype dtype) { return dtype == SPK_I32 || dtype == SPK_U64; }

static void push_element(lua_State *L, const spk_tensor *t, const int64_t *idx)
{
    if (dtype_is_integer(t->dtype))
        lua_pushinteger(L, (lua_Integer)spk_tensor_get_i64(t, idx));
    else
        lua_pushnumber(L, spk_tensor_get_f64(t, idx));
}

/* Stores the Lua value at `pos` (exact for integer dtypes). Errors are
 * reported against argument `arg`; `where` describes the element. */
static void store_element(lua_State *L, spk_tensor *t, const int64_t *idx, int pos, int arg, const char *where)
{
    if (lua_type(L, pos) != LUA_TNUMBER)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s: expected a number, got %s", where, luaL_typename(L, pos)));
    if (!dtype_is_integer(t->dtype)) {
        spk_tensor_set_f64(t, idx, lua_tonumber(L, pos));
        return;
    }
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, pos, &isint);
    if (!isint)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s: %s needs an integer, got %f", where,
                                              spk_dtype_name(t->dtype), lua_tonumber(L, pos)));
    if (t->dtype == SPK_I32 && (v < INT32_MIN || v > INT32_MAX))
        luaL_argerror(L, arg, lua_pushfstring(L, "%s: %I does not fit in i32", where, v));
    spk_tensor_set_i64(t, idx, (int64_t)v);
}

/* ---- the userdata ---- */

static spk_lua_tensor *check_slot(lua_State *L, int idx)
{
    return luaL_checkudata(L, idx, SPK_TENSOR_MT);
}

/* Idempotent: shared by __gc, __close and t:close(). */
static int tensor_release(lua_State *L)
{
    spk_lua_tensor *u = check_slot(L, 1);
    spk_tensor_free(u->t);
    u->t = NULL;
    return 0;
}

static int tensor_tostring(lua_State *L)
{
    spk_lua_tensor *u = check_slot(L, 1);
    const spk_tensor *t = u->t;
    if (!t) {
        lua_pushliteral(L, "tensor (closed)");
        return 1;
    }
    if (!spk_tensor_is_host(t)) {
        char shape[256];
        lua_pushfstring(L, "tensor(%s, %s, cuda:%d)", spk_dtype_name(t->dtype),
                        spk_shape_string(t, shape, sizeof shape), t->storage->device);
        return 1;
    }
    char *text = spk_tensor_format(t, FORMAT_THRESHOLD, FORMAT_EDGE);
    if (!text)
        return spk_lua_fail(L);
    lua_pushstring(L, text);
    free(text);
    return 1;
}

static int tensor_index(lua_State *L)
{
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL)
        return 1;
    if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "device") == 0) {
        spk_tensor *t = spk_lua_checktensor(L, 1);
        if (spk_tensor_is_host(t))
            lua_pushliteral(L, "cpu");
        else
            lua_pushfstring(L, "cuda:%d", t->storage->device);
        return 1;
    }
    return 1; /* nil */
}

static int tensor_len(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    if (t->ndim == 0)
        return luaL_error(L, "a 0-d tensor has no length");
    lua_pushinteger(L, (lua_Integer)t->shape[0]);
    return 1;
}

/* Same object only: Lua calls __eq only for two distinct userdata, so this
 * is always false there. Compare values with spk.allclose or spk.compare. */
static int tensor_eq(lua_State *L)
{
    lua_pushboolean(L, lua_rawequal(L, 1, 2));
    return 1;
}

/* An operand of an arithmetic metamethod: a tensor or NULL for anything else. */
static spk_tensor *operand(lua_State *L, int idx)
{
    spk_lua_tensor *u = luaL_testudata(L, idx, SPK_TENSOR_MT);
    if (u && !u->t)
        luaL_error(L, "tensor is closed");
    return u ? u->t : NULL;
}

static int binary_metamethod(lua_State *L, spk_tensor *(*op)(const spk_tensor *, const spk_tensor *),
                             const char *symbol)
{
    spk_tensor *a = operand(L, 1), *b = operand(L, 2);
    if (!a || !b)
        return luaL_error(L, "tensor %s %s: both operands must be tensors (got %s and %s)", symbol, symbol,
                          luaL_typename(L, 1), luaL_typename(L, 2));
    spk_lua_pushtensor(L, op(a, b));
    return 1;
}

static int tensor_add_mm(lua_State *L) { return binary_metamethod(L, spk_tensor_add, "+"); }
static int tensor_sub_mm(lua_State *L) { return binary_metamethod(L, spk_tensor_sub, "-"); }

static int tensor_mul_mm(lua_State *L)
{
    spk_tensor *a = operand(L, 1), *b = operand(L, 2);
    if (a && b)
        spk_lua_pushtensor(L, spk_tensor_mul(a, b));
    else if (a && lua_type(L, 2) == LUA_TNUMBER)
        spk_lua_pushtensor(L, spk_tensor_scale(a, lua_tonumber(L, 2)));
    else if (b && lua_type(L, 1) == LUA_TNUMBER)
        spk_lua_pushtensor(L, spk_tensor_scale(b, lua_tonumber(L, 1)));
    else
        return luaL_error(L, "tensor *: expected tensor * tensor or a number, got %s and %s", luaL_typename(L, 1),
                          luaL_typename(L, 2));
    return 1;
}

static int tensor_div_mm(lua_State *L)
{
    spk_tensor *a = operand(L, 1);
    if (!a || lua_type(L, 2) != LUA_TNUMBER)
        return luaL_error(L, "tensor /: only tensor / number is supported, got %s and %s", luaL_typename(L, 1),
                          luaL_typename(L, 2));
    spk_lua_pushtensor(L, spk_tensor_scale(a, 1.0 / lua_tonumber(L, 2)));
    return 1;
}

static int tensor_unm_mm(lua_State *L)
{
    spk_lua_pushtensor(L, spk_tensor_scale(spk_lua_checktensor(L, 1), -1.0));
    return 1;
}

/* ---- properties ---- */

static int tensor_close(lua_State *L) { return tensor_release(L); }

static int tensor_is_closed(lua_State *L)
{
    lua_pushboolean(L, check_slot(L, 1)->t == NULL);
    return 1;
}

/* v is copied first: the table's allocation may run a finalizer that closes
 * the tensor v belongs to. */
static void push_int64_list(lua_State *L, int n, const int64_t *from)
{
    int64_t v[SPK_MAX_DIMS];
    memcpy(v, from, sizeof *v * (size_t)n);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)v[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

static int tensor_shape(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    push_int64_list(L, t->ndim, t->shape);
    return 1;
}

static int tensor_strides(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    push_int64_list(L, t->ndim, t->strides);
    return 1;
}

static int tensor_size(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    lua_pushinteger(L, (lua_Integer)t->shape[check_dim(L, 2, t)]);
    return 1;
}

static int tensor_dim(lua_State *L)
{
    lua_pushinteger(L, spk_lua_checktensor(L, 1)->ndim);
    return 1;
}

static int tensor_offset(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)spk_lua_checktensor(L, 1)->offset);
    return 1;
}

static int tensor_dtype(lua_State *L)
{
    lua_pushstring(L, spk_dtype_name(spk_lua_checktensor(L, 1)->dtype));
    return 1;
}

static int tensor_numel(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)spk_tensor_numel(spk_lua_checktensor(L, 1)));
    return 1;
}

static int tensor_data_ptr(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)(intptr_t)spk_tensor_data(spk_lua_checktensor(L, 1)));
    return 1;
}

static int tensor_is_contiguous(lua_State *L)
{
    lua_pushboolean(L, spk_tensor_is_contiguous(spk_lua_checktensor(L, 1)));
    return 1;
}

/* ---- views ---- */

static int tensor_narrow(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    int dim = check_dim(L, 2, t);
    lua_Integer start = luaL_checkinteger(L, 3);
    lua_Integer length = luaL_checkinteger(L, 4);
    lua_Integer size = t->shape[dim];
    /* start may sit just past the end for an empty narrow */
    if (start < 1 || start > size + (length == 0 ? 1 : 0))
        luaL_argerror(L, 3, lua_pushfstring(L, "start %I out of range 1..%I for dim %d of size %I", start, size,
                                            dim + 1, size));
    if (length < 0 || length > size - (start - 1))
        luaL_argerror(L, 4, lua_pushfstring(L, "length %I out of range 0..%I for start %I in dim %d of size %I",
                                            length, size - start + 1, start, dim + 1, size));
    spk_lua_pushtensor(L, spk_tensor_narrow(t, dim, start - 1, length));
    return 1;
}

static int tensor_select(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    int dim = check_dim(L, 2, t);
    int64_t index = check_index(L, 3, t, dim, "index");
    spk_lua_pushtensor(L, spk_tensor_select(t, dim, index));
    return 1;
}

/* slice(dim, first[, last[, step]]): inclusive 1-based bounds like
 * string.sub, negative ones counting from the end (-1 is the last). A
 * negative step walks backwards from first down to last. */
static int tensor_slice(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    int dim = check_dim(L, 2, t);
    lua_Integer size = t->shape[dim];
    lua_Integer first = luaL_checkinteger(L, 3);
    lua_Integer last = luaL_optinteger(L, 4, -1);
    lua_Integer step = luaL_optinteger(L, 5, 1);
    if (step == 0)
        luaL_argerror(L, 5, "step must not be zero");
    lua_Integer f = first < 0 ? size + first + 1 : first;
    lua_Integer l = last < 0 ? size + last + 1 : last;
    if (f < 1 || f > size)
        luaL_argerror(L, 3, lua_pushfstring(L, "first %I out of range 1..%I (or -%I..-1) for dim %d of size %I",
                                            first, size, size, dim + 1, size));
    if (l < 0 || l > size)
        luaL_argerror(L, 4, lua_pushfstring(L, "last %I out of range 0..%I (or -%I..-1) for dim %d of size %I",
                                            last, size, size, dim + 1, size));
    /* To the core's Python-style [start, stop): for a backward walk that
     * reaches element 1, stop must be "before the beginning", which the core
     * spells as anything below -size. */
    int64_t start = f - 1;
    int64_t stop = step > 0 ? l : (l >= 2 ? l - 2 : -size - 1);
    spk_lua_pushtensor(L, spk_tensor_slice(t, dim, start, stop, step));
    return 1;
}

static int tensor_transpose(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    int d0, d1;
    if (lua_isnoneornil(L, 2) && lua_isnoneornil(L, 3)) {
        if (t->ndim != 2)
            return luaL_error(L, "transpose: give two dims for a %d-d tensor (only 2-d defaults to 1, 2)", t->ndim);
        d0 = 0;
        d1 = 1;
    } else {
        d0 = check_dim(L, 2, t);
        d1 = check_dim(L, 3, t);
    }
    spk_lua_pushtensor(L, spk_tensor_transpose(t, d0, d1));
    return 1;
}

static int tensor_view(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    int ndim;
    int64_t shape[SPK_MAX_DIMS];
    spk_lua_checkshape(L, 2, &ndim, shape, true);
    if (!spk_tensor_is_contiguous(t))
        return luaL_error(L, "view: the tensor is not contiguous; use reshape() or contiguous() first");
    spk_lua_pushtensor(L, spk_tensor_view(t, ndim, shape));
    return 1;
}

/* Like view, but copies first when the data is not contiguous. */
static int tensor_reshape(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    int ndim;
    int64_t shape[SPK_MAX_DIMS];
    spk_lua_checkshape(L, 2, &ndim, shape, true);
    spk_tensor *c = spk_tensor_contiguous(t);
    if (!c)
        return spk_lua_fail(L);
    spk_tensor *v = spk_tensor_view(c, ndim, shape);
    spk_tensor_free(c);
    spk_lua_pushtensor(L, v);
    return 1;
}

/* ---- copies ---- */

static int tensor_contiguous(lua_State *L)
{
    spk_lua_pushtensor(L, spk_tensor_contiguous(spk_lua_checktensor(L, 1)));
    return 1;
}

static int tensor_clone(lua_State *L)
{
    spk_lua_pushtensor(L, spk_tensor_clone(spk_lua_checktensor(L, 1)));
    return 1;
}

/* t:to(x): a dtype name converts; anything else goes to methods.to_device
 * (installed by the CUDA bindings) when present. */
static int tensor_to(lua_State *L)
{
    spk_lua_checktensor(L, 1); /* self first; a number name is made a string below (an allocation) */
    const char *name = luaL_checkstring(L, 2);
    spk_tensor *t = spk_lua_checktensor(L, 1);
    spk_dtype dtype;
    if (spk_dtype_from_name(name, &dtype) == 0) {
        spk_lua_pushtensor(L, spk_tensor_to_dtype(t, dtype));
        return 1;
    }
    spk_clear_error();
    spk_lua_push_tensor_methods(L);
    if (spk_lua_rawfield(L, -1, "to_device") != LUA_TNIL) {
        lua_pushvalue(L, 1);
        lua_pushvalue(L, 2);
        lua_call(L, 2, 1);
        return 1;
    }
    return luaL_error(L, "to: unknown dtype or device '%s'", name);
}

/* ---- elements ---- */

static int tensor_get(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    require_host(L, t, "get");
    int64_t idx[SPK_MAX_DIMS];
    check_indices(L, 2, t, lua_gettop(L) - 1, idx);
    push_element(L, t, idx);
    return 1;
}

static int tensor_set(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    require_host(L, t, "set");
    int top = lua_gettop(L);
    int64_t idx[SPK_MAX_DIMS];
    check_indices(L, 2, t, top - 2, idx);
    store_element(L, t, idx, top, top, "value");
    lua_settop(L, 1);
    return 1;
}

static int tensor_fill(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    if (spk_tensor_fill(t, luaL_checknumber(L, 2)) != 0)
        return spk_lua_fail(L);
    lua_settop(L, 1);
    return 1;
}

static void push_list(lua_State *L, const spk_tensor *t, int dim, int64_t *idx)
{
    if (dim == t->ndim) {
        push_element(L, t, idx);
        return;
    }
    luaL_checkstack(L, 4, "tolist");
    lua_createtable(L, (int)(t->shape[dim] < INT32_MAX ? t->shape[dim] : 0), 0);
    for (int64_t i = 0; i < t->shape[dim]; i++) {
        idx[dim] = i;
        push_list(L, t, dim + 1, idx);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

/* Nested Lua tables (a number for a 0-d tensor). */
static int tensor_tolist(lua_State *L)
{
    spk_tensor *t = spk_lua_holdtensor(L, 1); /* the tables made below may run finalizers */
    require_host(L, t, "tolist");
    int64_t idx[SPK_MAX_DIMS] = {0};
    push_list(L, t, 0, idx);
    return 1;
}

/* ---- arithmetic and reductions ---- */

static int tensor_add(lua_State *L)
{
    spk_tensor *a = spk_lua_checktensor(L, 1); /* self first: a closed self says so */
    spk_tensor *b = spk_lua_checktensor(L, 2);
    spk_lua_pushtensor(L, spk_tensor_add(a, b));
    return 1;
}

static int tensor_sub(lua_State *L)
{
    spk_tensor *a = spk_lua_checktensor(L, 1); /* self first: a closed self says so */
    spk_tensor *b = spk_lua_checktensor(L, 2);
    spk_lua_pushtensor(L, spk_tensor_sub(a, b));
    return 1;
}

static int tensor_mul(lua_State *L)
{
    spk_tensor *a = spk_lua_checktensor(L, 1); /* self first: a closed self says so */
    spk_tensor *b = spk_lua_checktensor(L, 2);
    spk_lua_pushtensor(L, spk_tensor_mul(a, b));
    return 1;
}

static int tensor_scale(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    spk_lua_pushtensor(L, spk_tensor_scale(t, luaL_checknumber(L, 2)));
    return 1;
}

static int tensor_abs(lua_State *L)
{
    spk_lua_pushtensor(L, spk_tensor_abs(spk_lua_checktensor(L, 1)));
    return 1;
}

static int reduction(lua_State *L, int (*fn)(const spk_tensor *, double *))
{
    double v;
    if (fn(spk_lua_checktensor(L, 1), &v) != 0)
        return spk_lua_fail(L);
    lua_pushnumber(L, v);
    return 1;
}

static int tensor_sum(lua_State *L) { return reduction(L, spk_tensor_sum); }
static int tensor_mean(lua_State *L) { return reduction(L, spk_tensor_mean); }
static int tensor_min(lua_State *L) { return reduction(L, spk_tensor_min); }
static int tensor_max(lua_State *L) { return reduction(L, spk_tensor_max); }
static int tensor_norm(lua_State *L) { return reduction(L, spk_tensor_norm); }

/* ---- constructors ---- */

static int new_filled(lua_State *L, double value)
{
    int ndim;
    int64_t shape[SPK_MAX_DIMS];
    int next = spk_lua_checkshape(L, 1, &ndim, shape, false);
    spk_dtype dtype = spk_lua_optdtype(L, next, SPK_F32);
    spk_lua_pushtensor(L, spk_tensor_full(dtype, ndim, shape, value));
    return 1;
}

static int module_zeros(lua_State *L) { return new_filled(L, 0.0); }
static int module_ones(lua_State *L) { return new_filled(L, 1.0); }

/* full(shape, value[, dtype]) with shape a table, or full(2, 3, value[, dtype]). */
static int module_full(lua_State *L)
{
    int ndim;
    int64_t shape[SPK_MAX_DIMS];
    int value_arg;
    if (lua_type(L, 1) == LUA_TTABLE) {
        value_arg = spk_lua_checkshape(L, 1, &ndim, shape, false);
    } else {
        int top = lua_gettop(L);
        value_arg = lua_type(L, top) == LUA_TSTRING ? top - 1 : top;
        read_shape(L, 1, value_arg - 1, &ndim, shape, false);
    }
    double value = luaL_checknumber(L, value_arg);
    spk_dtype dtype = spk_lua_optdtype(L, value_arg + 1, SPK_F32);
    spk_lua_pushtensor(L, spk_tensor_full(dtype, ndim, shape, value));
    return 1;
}

/* arange(stop), arange(start, stop[, step]) and an optional dtype last:
 * [start, stop) by step, as NumPy does. */
static int module_arange(lua_State *L)
{
    int n = 0;
    while (n < 3 && lua_type(L, n + 1) == LUA_TNUMBER)
        n++;
    if (n == 0)
        luaL_typeerror(L, 1, "number");
    double start = n >= 2 ? lua_tonumber(L, 1) : 0.0;
    double stop = n >= 2 ? lua_tonumber(L, 2) : lua_tonumber(L, 1);
    double step = n == 3 ? lua_tonumber(L, 3) : 1.0;
    if (step == 0)
        luaL_argerror(L, 3, "step must not be zero");
    spk_dtype dtype = spk_lua_optdtype(L, n + 1, SPK_F32);
    spk_lua_pushtensor(L, spk_tensor_arange(dtype, start, stop, step));
    return 1;
}

static void describe_path(char *buf, size_t size, int depth, const int64_t *idx)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < depth && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "[%" PRId64 "]", idx[d] + 1);
}

/* Fills t from the nested table on top of the stack at `depth`. */
static void fill_nested(lua_State *L, spk_tensor *t, int depth, int64_t *idx)
{
    char where[160];
    if (depth == t->ndim) {
        if (lua_type(L, -1) == LUA_TTABLE) {
            describe_path(where, sizeof where, depth, idx);
            luaL_argerror(L, 1, lua_pushfstring(L, "ragged nested table: entry %s is a table, expected a number",
                                                where));
        }
        char entry[sizeof where + 8] = "value";
        if (depth > 0) {
            describe_path(where, sizeof where, depth, idx);
            snprintf(entry, sizeof entry, "entry %s", where);
        }
        store_element(L, t, idx, lua_gettop(L), 1, entry);
        return;
    }
    if (lua_type(L, -1) != LUA_TTABLE) {
        describe_path(where, sizeof where, depth, idx);
        luaL_argerror(L, 1, lua_pushfstring(L, "ragged nested table: entry %s is a %s, expected a table of %I",
                                            where, luaL_typename(L, -1), (lua_Integer)t->shape[depth]));
    }
    lua_Integer len = (lua_Integer)lua_rawlen(L, -1);
    if (len != t->shape[depth]) {
        describe_path(where, sizeof where, depth, idx);
        luaL_argerror(L, 1, lua_pushfstring(L, "ragged nested table: entry %s has length %I, expected %I",
                                            depth ? where : "(top)", len, (lua_Integer)t->shape[depth]));
    }
    luaL_checkstack(L, 4, "tensor");
    for (lua_Integer i = 1; i <= len; i++) {
        idx[depth] = i - 1;
        lua_rawgeti(L, -1, i);
        fill_nested(L, t, depth + 1, idx);
        lua_pop(L, 1);
    }
}

/* spk.tensor(nested_table[, dtype]): the shape follows the first entry at
 * each depth; every other entry must agree. A number gives a 0-d tensor. */
static int module_tensor(lua_State *L)
{
    int type = lua_type(L, 1);
    if (type != LUA_TTABLE && type != LUA_TNUMBER)
        luaL_typeerror(L, 1, "nested table of numbers");
    spk_dtype dtype = spk_lua_optdtype(L, 2, SPK_F32);
    int ndim = 0;
    int64_t shape[SPK_MAX_DIMS];
    lua_pushvalue(L, 1);
    while (lua_type(L, -1) == LUA_TTABLE) {
        if (ndim == SPK_MAX_DIMS)
            luaL_argerror(L, 1, lua_pushfstring(L, "nested deeper than %d dims", SPK_MAX_DIMS));
        size_t len = lua_rawlen(L, -1);
        shape[ndim++] = (int64_t)len;
        if (len == 0)
            break;
        lua_rawgeti(L, -1, 1);
        lua_remove(L, -2);
    }
    lua_pop(L, 1);
    /* The userdata owns the tensor before filling, so a ragged table's error
     * leaves it to the collector. */
    spk_lua_pushtensor(L, spk_tensor_new(dtype, ndim, shape));
    spk_tensor *t = spk_lua_checktensor(L, -1);
    int64_t idx[SPK_MAX_DIMS] = {0};
    lua_pushvalue(L, 1);
    fill_nested(L, t, 0, idx);
    lua_pop(L, 1);
    return 1;
}

static int module_is_tensor(lua_State *L)
{
    lua_pushboolean(L, luaL_testudata(L, 1, SPK_TENSOR_MT) != NULL);
    return 1;
}

static const luaL_Reg tensor_methods[] = {
    {"close", tensor_close},
    {"is_closed", tensor_is_closed},
    {"shape", tensor_shape},
    {"size", tensor_size},
    {"dim", tensor_dim},
    {"strides", tensor_strides},
    {"offset", tensor_offset},
    {"dtype", tensor_dtype},
    {"numel", tensor_numel},
    {"data_ptr", tensor_data_ptr},
    {"is_contiguous", tensor_is_contiguous},
    {"narrow", tensor_narrow},
    {"select", tensor_select},
    {"slice", tensor_slice},
    {"transpose", tensor_transpose},
    {"view", tensor_view},
    {"reshape", tensor_reshape},
    {"contiguous", tensor_contiguous},
    {"clone", tensor_clone},
    {"to", tensor_to},
    {"fill", tensor_fill},
    {"get", tensor_get},
    {"set", tensor_set},
    {"tolist", tensor_tolist},
    {"add", tensor_add},
    {"sub", tensor_sub},
    {"mul", tensor_mul},
    {"scale", tensor_scale},
    {"abs", tensor_abs},
    {"sum", tensor_sum},
    {"mean", tensor_mean},
    {"min", tensor_min},
    {"max", tensor_max},
    {"norm", tensor_norm},
    {NULL, NULL},
};

static const luaL_Reg tensor_metamethods[] = {
    {"__gc", tensor_release},
    {"__close", tensor_release},
    {"__tostring", tensor_tostring},
    {"__len", tensor_len},
    {"__eq", tensor_eq},
    {"__add", tensor_add_mm},
    {"__sub", tensor_sub_mm},
    {"__mul", tensor_mul_mm},
    {"__div", tensor_div_mm},
    {"__unm", tensor_unm_mm},
    {NULL, NULL},
};

static const luaL_Reg module_functions[] = {
    {"tensor", module_tensor},
    {"zeros", module_zeros},
    {"ones", module_ones},
    {"full", module_full},
    {"arange", module_arange},
    {"is_tensor", module_is_tensor},
    {NULL, NULL},
};

void spk_open_tensor(lua_State *L, int module)
{
    /* The methods table lives in the registry so other areas can extend it;
     * an existing one is kept (and so are methods others added to it). */
    spk_lua_push_tensor_methods(L);
    luaL_setfuncs(L, tensor_methods, 0);
    int methods = lua_gettop(L);

    luaL_newmetatable(L, SPK_TENSOR_MT); /* sets __name */
    luaL_setfuncs(L, tensor_metamethods, 0);
    lua_pushvalue(L, methods);
    lua_pushcclosure(L, tensor_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 2);

    lua_pushvalue(L, module);
    luaL_setfuncs(L, module_functions, 0);
    static const char *const dtypes[] = {"f32", "f64", "i32", "u64"};
    lua_createtable(L, 4, 0);
    for (int i = 0; i < 4; i++) {
        lua_pushstring(L, dtypes[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "dtypes");
    lua_pop(L, 1);

    spk_open_random(L, module);
    spk_open_files(L, module);
    spk_open_compare(L, module);
}
