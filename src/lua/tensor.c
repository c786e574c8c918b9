/* Lua bindings of host tensors: the "spk.tensor" userdata (in the style of
 * Lua's liolib.c: a methods table reached through __index, and one idempotent
 * release shared by __gc, __close and t:close()), and the constructors.
 *
 * Lua is 1-based: dims, indices, narrow starts and slice bounds given from Lua
 * are translated here before the 0-based C core sees them. Arguments are
 * checked here so errors name the argument (luaL_argerror); failures inside
 * the core are raised with spk_last_error(). Functions are registered through
 * spk_lua_setfuncs_checked (bind.h), which refuses arguments past each one's list.
 * The rules for dtypes, broadcasting, numbers beside tensors and reductions
 * are the core's (core/tensor.h); this file only passes Lua integers and
 * floats on as such. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "lua/tensor_area.h"

/* tostring(t) prints every element up to this many, then summarises with
 * "..." keeping FORMAT_EDGE items at each end of every dim. */
#define FORMAT_THRESHOLD 1000
#define FORMAT_EDGE 3

/* ---- argument checks that translate 1-based Lua to 0-based C ---- */

/* A number argument; strings are not converted (a tensor value is never text). */
static spk_scalar check_number(lua_State *L, int arg)
{
    if (lua_type(L, arg) != LUA_TNUMBER)
        spk_lua_typeerror(L, arg, "number");
    return spk_lua_toscalar(L, arg);
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

static void push_scalar(lua_State *L, spk_scalar v)
{
    if (v.is_integer)
        lua_pushinteger(L, (lua_Integer)v.i);
    else
        lua_pushnumber(L, (lua_Number)v.f);
}

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
        luaL_argerror(L, arg, lua_pushfstring(L, "%s: expected a number, got %s", where, spk_lua_typename(L, pos)));
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

/* f(self) -> tensor. */
static int unary(lua_State *L, spk_tensor *(*f)(const spk_tensor *))
{
    spk_lua_pushtensor(L, f(spk_lua_checktensor(L, 1)));
    return 1;
}

/* The slot of a tensor (open or closed) at idx. */
static spk_lua_tensor *check_slot(lua_State *L, int idx) { return spk_lua_checkudata(L, idx, SPK_TENSOR_MT, "tensor"); }

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
    char *text = spk_tensor_format_digits(t, FORMAT_THRESHOLD, FORMAT_EDGE, spk_lua_print_digits(L));
    if (!text)
        return spk_lua_fail(L);
    lua_pushstring(L, text);
    free(text);
    return 1;
}

/* x[i]: the 1-based position i along dim 1 (negative counts from the end).
 * Returns it 0-based; the message names the index and the size. */
static int64_t first_dim_index(lua_State *L, const spk_tensor *t, int key)
{
    int isint = 0;
    lua_Integer i = lua_tointegerx(L, key, &isint);
    if (!isint)
        luaL_error(L, "tensor index must be an integer, got %s", spk_lua_describe(L, key));
    if (t->ndim == 0)
        luaL_error(L, "x[%I]: a 0-d tensor has no dims to index (read it with x:get())", i);
    lua_Integer size = t->shape[0];
    lua_Integer at = i < 0 ? size + i + 1 : i;
    if (at < 1 || at > size)
        luaL_error(L, "x[%I]: index out of range 1..%I (or -%I..-1) for dim 1 of size %I", i, size, size, size);
    return (int64_t)at - 1;
}

/* Methods by name, `device`, and x[i]: along dim 1 a view of the rest (a
 * 1-d tensor gives the element itself, as a number). */
static int tensor_index(lua_State *L)
{
    int kt = lua_type(L, 2);
    if (kt == LUA_TNUMBER) {
        spk_tensor *t = spk_lua_checktensor(L, 1);
        int64_t i = first_dim_index(L, t, 2);
        if (t->ndim == 1) {
            require_host(L, t, "x[i]");
            push_element(L, t, &i);
        } else {
            spk_lua_pushtensor(L, spk_tensor_select(t, 0, i));
        }
        return 1;
    }
    if (kt != LUA_TSTRING)
        return luaL_error(L, "a tensor is indexed by an integer (x[i]) or a method name, got %s",
                          spk_lua_describe(L, 2));
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL)
        return 1;
    if (strcmp(lua_tostring(L, 2), "device") == 0) {
        spk_tensor *t = spk_lua_checktensor(L, 1);
        if (spk_tensor_is_host(t))
            lua_pushliteral(L, "cpu");
        else
            lua_pushfstring(L, "cuda:%d", t->storage->device);
        return 1;
    }
    return 1; /* nil */
}

/* x[i] = v: a number fills the selected part (sets the element of a 1-d
 * tensor); a tensor is copied into it, broadcast and converted as
 * spk_tensor_assign does. */
static int tensor_newindex(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    if (lua_type(L, 2) != LUA_TNUMBER)
        return luaL_error(L, "x[%s] = ...: only x[i] = value can be set on a tensor (it has no fields to set)",
                          spk_lua_describe(L, 2));
    int64_t i = first_dim_index(L, t, 2);
    require_host(L, t, "x[i] = value");
    spk_tensor *dst = spk_tensor_select(t, 0, i);
    if (!dst)
        return spk_lua_fail(L);
    spk_lua_pushtensor(L, dst); /* owned by Lua from here: an error below leaves it to the collector */
    spk_tensor *src = spk_lua_totensor(L, 3);
    int rc;
    if (src) {
        rc = spk_tensor_assign(dst, src);
    } else if (lua_type(L, 3) == LUA_TNUMBER) {
        rc = spk_tensor_fill_scalar(dst, spk_lua_toscalar(L, 3));
    } else {
        return luaL_error(L, "x[%I] = value: expected a number or a tensor, got %s", (lua_Integer)i + 1,
                          spk_lua_typename(L, 3));
    }
    if (rc)
        return spk_lua_fail(L);
    return 0;
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
 * is always false there. Compare values with x:eq(y), spk.allclose or
 * spk.compare. */
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

/* a op b with tensors or numbers on either side (at least one tensor). */
static int arith(lua_State *L, spk_binop op, const char *symbol)
{
    spk_tensor *a = operand(L, 1), *b = operand(L, 2);
    if (a && b)
        spk_lua_pushtensor(L, spk_tensor_binary(op, a, b));
    else if (a && lua_type(L, 2) == LUA_TNUMBER)
        spk_lua_pushtensor(L, spk_tensor_binary_scalar(op, a, spk_lua_toscalar(L, 2), false));
    else if (b && lua_type(L, 1) == LUA_TNUMBER)
        spk_lua_pushtensor(L, spk_tensor_binary_scalar(op, b, spk_lua_toscalar(L, 1), true));
    else
        return luaL_error(L, "%s %s %s: expected tensors or numbers", spk_lua_typename(L, 1), symbol,
                          spk_lua_typename(L, 2));
    return 1;
}

static int tensor_add_mm(lua_State *L) { return arith(L, SPK_OP_ADD, "+"); }
static int tensor_sub_mm(lua_State *L) { return arith(L, SPK_OP_SUB, "-"); }
static int tensor_mul_mm(lua_State *L) { return arith(L, SPK_OP_MUL, "*"); }
static int tensor_div_mm(lua_State *L) { return arith(L, SPK_OP_DIV, "/"); }

static int tensor_unm_mm(lua_State *L) { return unary(L, spk_tensor_neg); }

/* Operators tensors do not have: a message saying what to use instead
 * (rather than Lua's "attempt to perform arithmetic on a userdata value"). */
static int unsupported(lua_State *L, const char *symbol, const char *instead)
{
    return luaL_error(L, "%s %s %s: tensors do not support '%s'%s", spk_lua_typename(L, 1), symbol,
                      spk_lua_typename(L, 2), symbol, instead);
}

static int tensor_idiv_mm(lua_State *L) { return unsupported(L, "//", " (divide with / and convert with to())"); }
static int tensor_mod_mm(lua_State *L) { return arith(L, SPK_OP_MOD, "%"); }
static int tensor_pow_mm(lua_State *L) { return arith(L, SPK_OP_POW, "^"); }
static int tensor_concat_mm(lua_State *L) { return unsupported(L, "..", " (tostring(x) gives the text)"); }
static int tensor_bitwise_mm(lua_State *L) { return unsupported(L, "&, |, ~, << or >>", ""); }
static int tensor_lt_mm(lua_State *L)
{
    return unsupported(L, "<", ": elementwise, x:lt(y) (also le, gt, ge, eq, ne) gives 1 where it holds");
}
static int tensor_le_mm(lua_State *L)
{
    return unsupported(L, "<=", ": elementwise, x:le(y) (also lt, gt, ge, eq, ne) gives 1 where it holds");
}
static int tensor_call_mm(lua_State *L)
{
    spk_lua_checktensor(L, 1);
    return luaL_error(L, "a tensor is not a function (x[i] selects, x:get(i, ...) reads an element)");
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

/* size(): the whole shape, as Torch's; size(d): dim d's size. */
static int tensor_size(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    if (lua_isnoneornil(L, 2))
        push_int64_list(L, t->ndim, t->shape);
    else
        lua_pushinteger(L, (lua_Integer)t->shape[spk_lua_checkdim(L, 2, t)]);
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
    int dim = spk_lua_checkdim(L, 2, t);
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
    int dim = spk_lua_checkdim(L, 2, t);
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
    int dim = spk_lua_checkdim(L, 2, t);
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
        d0 = spk_lua_checkdim(L, 2, t);
        d1 = spk_lua_checkdim(L, 3, t);
    }
    spk_lua_pushtensor(L, spk_tensor_transpose(t, d0, d1));
    return 1;
}

/* t:view(shape) and t:reshape(shape): self, then the new shape (one -1
 * inferred); self is taken again after it (the shape table's metamethods may
 * have closed it). */
static spk_tensor *self_and_shape(lua_State *L, int *ndim, int64_t *shape)
{
    spk_lua_checktensor(L, 1);
    spk_lua_check_end(L, spk_lua_checkshape(L, 2, ndim, shape, true));
    return spk_lua_checktensor(L, 1);
}

static int tensor_view(lua_State *L)
{
    int ndim;
    int64_t shape[SPK_MAX_DIMS];
    spk_tensor *t = self_and_shape(L, &ndim, shape);
    if (!spk_tensor_is_contiguous(t))
        return luaL_error(L, "view: the tensor is not contiguous; use reshape() or contiguous() first");
    spk_lua_pushtensor(L, spk_tensor_view(t, ndim, shape));
    return 1;
}

/* Like view, but copies first when the data is not contiguous. */
static int tensor_reshape(lua_State *L)
{
    int ndim;
    int64_t shape[SPK_MAX_DIMS];
    spk_tensor *c = spk_tensor_contiguous(self_and_shape(L, &ndim, shape));
    if (!c)
        return spk_lua_fail(L);
    spk_tensor *v = spk_tensor_view(c, ndim, shape);
    spk_tensor_free(c);
    spk_lua_pushtensor(L, v);
    return 1;
}

/* ---- copies ---- */

static int tensor_contiguous(lua_State *L) { return unary(L, spk_tensor_contiguous); }

static int tensor_clone(lua_State *L) { return unary(L, spk_tensor_clone); }

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
    if (spk_tensor_fill_scalar(t, check_number(L, 2)) != 0)
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

/* ---- arithmetic, comparisons and reductions ---- */

/* self op other, other a tensor or a number (the core's promotion rules). */
static int method_binary(lua_State *L, spk_binop op)
{
    spk_tensor *a = spk_lua_checktensor(L, 1); /* self first: a closed self says so */
    if (lua_type(L, 2) == LUA_TNUMBER) {
        spk_lua_pushtensor(L, spk_tensor_binary_scalar(op, a, spk_lua_toscalar(L, 2), false));
        return 1;
    }
    if (!spk_lua_totensor(L, 2) && !luaL_testudata(L, 2, SPK_TENSOR_MT))
        spk_lua_typeerror(L, 2, "tensor or number");
    spk_tensor *b = spk_lua_checktensor(L, 2);
    spk_lua_pushtensor(L, spk_tensor_binary(op, a, b));
    return 1;
}

static int tensor_add(lua_State *L) { return method_binary(L, SPK_OP_ADD); }
static int tensor_sub(lua_State *L) { return method_binary(L, SPK_OP_SUB); }
static int tensor_mul(lua_State *L) { return method_binary(L, SPK_OP_MUL); }
static int tensor_div(lua_State *L) { return method_binary(L, SPK_OP_DIV); }
static int tensor_eq_method(lua_State *L) { return method_binary(L, SPK_OP_EQ); }
static int tensor_ne(lua_State *L) { return method_binary(L, SPK_OP_NE); }
static int tensor_lt(lua_State *L) { return method_binary(L, SPK_OP_LT); }
static int tensor_le(lua_State *L) { return method_binary(L, SPK_OP_LE); }
static int tensor_gt(lua_State *L) { return method_binary(L, SPK_OP_GT); }
static int tensor_ge(lua_State *L) { return method_binary(L, SPK_OP_GE); }
static int tensor_pow(lua_State *L) { return method_binary(L, SPK_OP_POW); }
static int tensor_mod(lua_State *L) { return method_binary(L, SPK_OP_MOD); }

/* scale(s): self * s for a number s (as x * s). */
static int tensor_scale(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    spk_lua_pushtensor(L, spk_tensor_binary_scalar(SPK_OP_MUL, t, check_number(L, 2), false));
    return 1;
}

static int tensor_neg(lua_State *L) { return unary(L, spk_tensor_neg); }

static int tensor_abs(lua_State *L) { return unary(L, spk_tensor_abs); }

/* 0-based positions (a new i32 tensor) to 1-based ones, replacing it. */
static spk_tensor *one_based(spk_tensor *positions)
{
    if (!positions)
        return NULL;
    spk_tensor *r = spk_tensor_binary_scalar(SPK_OP_ADD, positions, spk_scalar_int(1), false);
    spk_tensor_free(positions);
    return r;
}

/* The reduction `r` of self with its optional dim and keepdim at `arg`,
 * arg + 1. Without either: the whole-tensor value as a Lua number (an
 * integer where the core's value is one; positions 1-based). With them: a
 * tensor, and for min and max a second one of 1-based positions. */
static int reduce(lua_State *L, spk_reduction r, double p, int arg)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    if (lua_type(L, arg) == LUA_TTABLE)
        return spk_lua_reduce_dims(L, r, p, arg);
    int dim = spk_lua_optreducedim(L, arg, t);
    bool keepdim = spk_lua_optkeepdim(L, arg + 1);
    if (dim == SPK_ALL_DIMS && !keepdim) {
        spk_scalar v;
        if (spk_tensor_reduce_value(t, r, p, &v) != 0)
            return spk_lua_fail(L);
        if (r == SPK_RED_ARGMIN || r == SPK_RED_ARGMAX)
            v.i += 1;
        push_scalar(L, v);
        return 1;
    }
    bool with_positions = r == SPK_RED_MIN || r == SPK_RED_MAX;
    spk_tensor *positions = NULL;
    spk_tensor *out = spk_tensor_reduce(t, r, dim, keepdim, p, with_positions ? &positions : NULL);
    if (!out)
        return spk_lua_fail(L);
    if (r == SPK_RED_ARGMIN || r == SPK_RED_ARGMAX)
        out = one_based(out);
    spk_lua_pushtensor(L, out);
    if (!with_positions)
        return 1;
    spk_lua_pushtensor(L, one_based(positions));
    return 2;
}

static int tensor_sum(lua_State *L) { return reduce(L, SPK_RED_SUM, 0, 2); }
static int tensor_mean(lua_State *L) { return reduce(L, SPK_RED_MEAN, 0, 2); }
static int tensor_min(lua_State *L) { return reduce(L, SPK_RED_MIN, 0, 2); }
static int tensor_max(lua_State *L) { return reduce(L, SPK_RED_MAX, 0, 2); }
static int tensor_argmin(lua_State *L) { return reduce(L, SPK_RED_ARGMIN, 0, 2); }
static int tensor_argmax(lua_State *L) { return reduce(L, SPK_RED_ARGMAX, 0, 2); }

/* norm(p = 2, dim, keepdim) */
static int tensor_norm(lua_State *L)
{
    spk_lua_checktensor(L, 1);
    double p = 2;
    if (!lua_isnoneornil(L, 2)) {
        if (lua_type(L, 2) != LUA_TNUMBER)
            luaL_argerror(L, 2, lua_pushfstring(L, "p must be a number, got %s", spk_lua_describe(L, 2)));
        p = lua_tonumber(L, 2);
        if (spk_norm_order_check(p) != 0)
            luaL_argerror(L, 2, spk_last_error());
    }
    return reduce(L, SPK_RED_NORM, p, 3);
}

/* ---- constructors ---- */

static int new_filled(lua_State *L, double value)
{
    int ndim;
    int64_t shape[SPK_MAX_DIMS];
    int next = spk_lua_checkshape(L, 1, &ndim, shape, false);
    spk_dtype dtype = spk_lua_optdtype(L, next, SPK_F32);
    spk_lua_check_end(L, next + 1);
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
        while (top > 1 && lua_isnil(L, top))
            top--;
        value_arg = lua_type(L, top) == LUA_TSTRING ? top - 1 : top;
        if (value_arg < 1)
            value_arg = 1;
        int after = spk_lua_readshape(L, 1, value_arg - 1, &ndim, shape, false);
        if (after < value_arg)
            luaL_argerror(L, after, lua_pushfstring(L, "shape entry %d must be an integer, got %s", after,
                                                    spk_lua_describe(L, after)));
    }
    spk_scalar value = check_number(L, value_arg);
    spk_dtype dtype = spk_lua_optdtype(L, value_arg + 1, SPK_F32);
    spk_lua_check_end(L, value_arg + 2);
    spk_lua_pushtensor(L, spk_tensor_full_scalar(dtype, ndim, shape, value));
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
        spk_lua_typeerror(L, 1, "number");
    double start = n >= 2 ? lua_tonumber(L, 1) : 0.0;
    double stop = n >= 2 ? lua_tonumber(L, 2) : lua_tonumber(L, 1);
    double step = n == 3 ? lua_tonumber(L, 3) : 1.0;
    if (step == 0)
        luaL_argerror(L, 3, "step must not be zero");
    spk_dtype dtype = spk_lua_optdtype(L, n + 1, SPK_F32);
    spk_lua_check_end(L, n + 2);
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
                                            where, spk_lua_typename(L, -1), (lua_Integer)t->shape[depth]));
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
        spk_lua_typeerror(L, 1, "nested table of numbers");
    spk_dtype dtype = spk_lua_optdtype(L, 2, SPK_F32);
    spk_lua_check_end(L, 3);
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

/* Parameters as the argument check shows them (bind.h); "..." marks lists the function
 * checks itself (spk_lua_check_end, or get/set's count of indices). */
static const spk_lua_checked_reg tensor_methods[] = {
    {"close", tensor_close,
     "t:close()\nFrees the tensor's storage now (also at <close> and collection); later use is an error.",
     ""},
    {"is_closed", tensor_is_closed,
     "t:is_closed() -> boolean\nWhether t was closed.",
     ""},
    {"shape", tensor_shape,
     "t:shape() -> {size, ...}\nThe size of every dimension, as a new list.",
     ""},
    {"size", tensor_size,
     "t:size([dim]) -> {size, ...} | integer\nThe shape as a new list, or the size of dimension dim (1-based; negative counts from the last).",
     "dim"},
    {"dim", tensor_dim,
     "t:dim() -> integer\nThe number of dimensions (0 for a scalar tensor).",
     ""},
    {"strides", tensor_strides,
     "t:strides() -> {stride, ...}\nElements to step per dimension in the storage.",
     ""},
    {"offset", tensor_offset,
     "t:offset() -> integer\nWhere the view starts in its storage, in elements (0-based).",
     ""},
    {"dtype", tensor_dtype,
     "t:dtype() -> \"f32\" | \"f64\" | \"i32\" | \"u64\"",
     ""},
    {"numel", tensor_numel,
     "t:numel() -> integer\nThe number of elements.",
     ""},
    {"data_ptr", tensor_data_ptr,
     "t:data_ptr() -> integer\nThe address of the first element (host or device), for kernels and debugging.",
     ""},
    {"is_contiguous", tensor_is_contiguous,
     "t:is_contiguous() -> boolean\nWhether the elements are dense in row-major order.",
     ""},
    {"narrow", tensor_narrow,
     "t:narrow(dim, start, length) -> view\n"
     "The `length` entries of dimension dim from index start (1-based), sharing t's storage.",
     "dim, start, length"},
    {"select", tensor_select,
     "t:select(dim, index) -> view\nEntry `index` (1-based) of dimension dim, that dimension removed; shares storage.",
     "dim, index"},
    {"slice", tensor_slice,
     "t:slice(dim, first[, last = -1[, step = 1]]) -> view\n"
     "Entries first..last of dimension dim by step, bounds inclusive and 1-based like string.sub (negative\n"
     "ones count from the end); a negative step walks backwards. Shares storage.",
     "dim, first, last, step"},
    {"transpose", tensor_transpose,
     "t:transpose([dim1, dim2]) -> view\nSwaps two dimensions (a 2-d tensor: 1 and 2 by default); shares storage.",
     "dim1, dim2"},
    {"view", tensor_view,
     "t:view(shape) -> view\n"
     "The same elements in another shape ({2, -1}: one size inferred); t must be contiguous (else reshape).",
     "shape..."},
    {"reshape", tensor_reshape,
     "t:reshape(shape) -> tensor\nAs view, copying first when t is not contiguous.",
     "shape..."},
    {"contiguous", tensor_contiguous,
     "t:contiguous() -> tensor\nA dense row-major copy (t itself when it already is).",
     ""},
    {"clone", tensor_clone,
     "t:clone() -> tensor\nA copy with its own storage, on t's device.",
     ""},
    {"to", tensor_to,
     "t:to(dtype | \"cuda\" | \"cuda:N\" | \"cpu\"[, stream]) -> tensor\n"
     "A copy converted to dtype (\"f32\", \"f64\", \"i32\", \"u64\"), or moved to a device.",
     "dtype or device"},
    {"fill", tensor_fill,
     "t:fill(value) -> t\nSets every element to value (host tensors).",
     "value"},
    {"get", tensor_get,
     "t:get(i, j, ...) -> number\nThe element at 1-based indices, one per dimension (host tensors).",
     "index..."},
    {"set", tensor_set,
     "t:set(i, j, ..., value) -> t\nStores value at 1-based indices, one per dimension (exact for i32 and u64).",
     "index..., value"},
    {"tolist", tensor_tolist,
     "t:tolist() -> nested tables\nThe elements as nested Lua lists (a number for a 0-d tensor).",
     ""},
    {"add", tensor_add,
     "t:add(u) -> tensor\nElementwise t + u, u a tensor or a number, with NumPy's broadcasting and dtype promotion; also t + u.",
     "other"},
    {"sub", tensor_sub,
     "t:sub(u) -> tensor\nElementwise t - u, broadcast and promoted as add; also t - u.",
     "other"},
    {"mul", tensor_mul,
     "t:mul(u) -> tensor\nElementwise t * u, broadcast and promoted as add; also t * u.",
     "other"},
    {"div", tensor_div,
     "t:div(u) -> tensor\nElementwise true division t / u (f32 for f32 operands, else f64); also t / u.",
     "other"},
    {"eq", tensor_eq_method,
     "t:eq(u) -> tensor\nElementwise t == u as an i32 tensor of 1 and 0 (broadcast; exact for integers).",
     "other"},
    {"ne", tensor_ne,
     "t:ne(u) -> tensor\nElementwise t ~= u as i32 1 and 0.",
     "other"},
    {"lt", tensor_lt,
     "t:lt(u) -> tensor\nElementwise t < u as i32 1 and 0.",
     "other"},
    {"le", tensor_le,
     "t:le(u) -> tensor\nElementwise t <= u as i32 1 and 0.",
     "other"},
    {"gt", tensor_gt,
     "t:gt(u) -> tensor\nElementwise t > u as i32 1 and 0.",
     "other"},
    {"ge", tensor_ge,
     "t:ge(u) -> tensor\nElementwise t >= u as i32 1 and 0.",
     "other"},
    {"pow", tensor_pow,
     "t:pow(u) -> tensor\nElementwise t ^ u, broadcast and promoted as add (integers: no negative exponent); also t ^ u.",
     "other"},
    {"mod", tensor_mod,
     "t:mod(u) -> tensor\nElementwise t % u with the divisor's sign, as Lua's % and NumPy's remainder; also t % u.", "other"},
    {"scale", tensor_scale,
     "t:scale(number) -> tensor\nEvery element times number.",
     "factor"},
    {"neg", tensor_neg,
     "t:neg() -> tensor\nElementwise -t (integers wrap); also -t.",
     ""},
    {"abs", tensor_abs,
     "t:abs() -> tensor\nElementwise absolute value.",
     ""},
    {"sum", tensor_sum,
     "t:sum([dim[, keepdim]]) -> number | tensor\nThe sum of every element, or over dimension dim (1-based, negative from the end) as a tensor,\nthat dimension kept with size 1 when keepdim (i32 sums are f64). dim may be a list of dims ({1, 3}),\nas may every reduction's but argmin's and argmax's.",
     "dim, keepdim"},
    {"mean", tensor_mean,
     "t:mean([dim[, keepdim]]) -> number | tensor\nThe mean of every element, or over dimension dim, as sum.",
     "dim, keepdim"},
    {"min", tensor_min,
     "t:min([dim[, keepdim]]) -> number | tensor, positions\nThe smallest element, or over dimension dim the smallest values and their 1-based positions.",
     "dim, keepdim"},
    {"max", tensor_max,
     "t:max([dim[, keepdim]]) -> number | tensor, positions\nThe largest element, or over dimension dim the largest values and their 1-based positions.",
     "dim, keepdim"},
    {"argmin", tensor_argmin,
     "t:argmin([dim[, keepdim]]) -> integer | tensor\nThe 1-based position of the smallest element (row-major), or along dim as an i32 tensor.",
     "dim, keepdim"},
    {"argmax", tensor_argmax,
     "t:argmax([dim[, keepdim]]) -> integer | tensor\nThe 1-based position of the largest element (row-major), or along dim as an i32 tensor.",
     "dim, keepdim"},
    {"norm", tensor_norm,
     "t:norm([p = 2[, dim[, keepdim]]]) -> number | tensor\nThe p-norm of every element or over dim: p = 2, 1, any p > 0, 0 (non-zeros), math.huge (max |x|)\nor -math.huge (min |x|). Of nothing (no element, an empty dim) it is 0 for every p but -math.huge, which\nis an error, as NumPy 2's norms are.",
     "p, dim, keepdim"},
    {NULL, NULL, NULL, NULL},
};

static const luaL_Reg tensor_metamethods[] = {
    {"__gc", tensor_release},
    {"__close", tensor_release},
    {"__tostring", tensor_tostring},
    {"__newindex", tensor_newindex},
    {"__len", tensor_len},
    {"__eq", tensor_eq},
    {"__add", tensor_add_mm},
    {"__sub", tensor_sub_mm},
    {"__mul", tensor_mul_mm},
    {"__div", tensor_div_mm},
    {"__unm", tensor_unm_mm},
    {"__idiv", tensor_idiv_mm},
    {"__mod", tensor_mod_mm},
    {"__pow", tensor_pow_mm},
    {"__concat", tensor_concat_mm},
    {"__band", tensor_bitwise_mm},
    {"__bor", tensor_bitwise_mm},
    {"__bxor", tensor_bitwise_mm},
    {"__shl", tensor_bitwise_mm},
    {"__shr", tensor_bitwise_mm},
    {"__bnot", tensor_bitwise_mm},
    {"__lt", tensor_lt_mm},
    {"__le", tensor_le_mm},
    {"__call", tensor_call_mm},
    {NULL, NULL},
};

static const spk_lua_checked_reg module_functions[] = {
    {"tensor", module_tensor,
     "spk.tensor(nested_table[, dtype = \"f32\"]) -> tensor\n"
     "A host tensor from nested lists ({{1, 2}, {3, 4}} is [2, 2]); a number gives a 0-d tensor. f32 unless\n"
     "dtype says otherwise, integers included (NumPy would give int64 or float64; spk computes in f32).",
     "values, dtype"},
    {"zeros", module_zeros,
     "spk.zeros(shape[, dtype = \"f32\"]) -> tensor\nA host tensor of zeros; shape is {2, 3} or 2, 3.",
     "shape..., dtype"},
    {"ones", module_ones,
     "spk.ones(shape[, dtype = \"f32\"]) -> tensor\nA host tensor of ones; shape is {2, 3} or 2, 3.",
     "shape..., dtype"},
    {"full", module_full,
     "spk.full(shape, value[, dtype = \"f32\"]) -> tensor\nA host tensor with every element value.",
     "shape..., value, dtype"},
    {"arange", module_arange,
     "spk.arange([start = 0, ]stop[, step = 1][, dtype = \"f32\"]) -> tensor\n"
     "The 1-d tensor start, start + step, ... up to but not including stop, as NumPy's arange; f32 unless\n"
     "dtype says otherwise (NumPy would give int64 for integers; spk computes in f32).",
     "start, stop, step, dtype"},
    {"is_tensor", module_is_tensor,
     "spk.is_tensor(value) -> boolean\nWhether value is a tensor (open or closed).",
     "value"},
    {NULL, NULL, NULL, NULL},
};

#define TENSOR_DOC \
    "tensor: an n-d array (up to 8 dims) of f32, f64, i32 or u64 on the host or a CUDA device.\n" \
    "Dims and indices are 1-based. Views (narrow, select, slice, transpose, view) share storage;\n" \
    "t.device is \"cpu\" or \"cuda:N\"; #t is the first dimension's size; + - * / work elementwise."

void spk_open_tensor(lua_State *L, int module)
{
    /* The methods table lives in the registry so other areas can extend it;
     * an existing one is kept (and so are methods others added to it). */
    spk_lua_push_tensor_methods(L);
    spk_lua_setfuncs_checked(L, tensor_methods, &spk_lua_tensor_self);
    int methods = lua_gettop(L);
    spk_lua_settype(L, SPK_TENSOR_MT, methods, TENSOR_DOC);

    luaL_newmetatable(L, SPK_TENSOR_MT);
    /* The name Lua's own messages use ("number expected, got tensor"); the
     * registry key stays SPK_TENSOR_MT. */
    lua_pushliteral(L, "tensor");
    lua_setfield(L, -2, "__name");
    luaL_setfuncs(L, tensor_metamethods, 0);
    lua_pushvalue(L, methods);
    lua_pushcclosure(L, tensor_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 2);

    lua_pushvalue(L, module);
    spk_lua_setfuncs_checked(L, module_functions, NULL);
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
    spk_open_tensor_math(L, module);
}
