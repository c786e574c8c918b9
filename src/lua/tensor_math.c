/* Lua bindings of NumPy's other everyday tensor functions (core/tensor.h):
 * spk.empty, linspace, eye, cat, stack, where, matmul, exp, log, sqrt, abs,
 * isnan, isfinite and print_options, and the methods exp, log, sqrt, isnan,
 * isfinite, any, all, mm / matmul, squeeze, unsqueeze and permute
 * (pow and mod, and the metamethods x ^ y and x % y, are tensor.c's). Reductions over
 * a list of dims ({1, 3}) come here from every reduction method.
 *
 * Dims are 1-based and negative from the end, as everywhere in Lua; the core
 * sees them 0-based. Registered through lua/bind.h. */
#include <stdlib.h>

#include "core/error.h"
#include "lua/tensor_area.h"

#define PRINT_DIGITS_KEY "spk.tensor.print_digits"

/* ---- arguments ---- */

/* A list of dims at `arg` (1-based, negative from the end) into 0-based
 * dims; returns how many. */
static int read_dims(lua_State *L, int arg, const spk_tensor *t, int *dims, const char *what)
{
    int n = spk_lua_rawcount(L, arg);
    if (n == 0)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s: give at least one dim in the list", what));
    if (n > t->ndim)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s: %d dims for a %d-d tensor", what, n, t->ndim));
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, arg, i);
        int isint = 0;
        lua_Integer d = lua_tointegerx(L, -1, &isint);
        if (!isint || lua_type(L, -1) != LUA_TNUMBER)
            luaL_argerror(L, arg, lua_pushfstring(L, "%s: dim entry %d must be an integer, got %s", what, i,
                                                  spk_lua_describe(L, -1)));
        if (d < 0)
            d += t->ndim + 1;
        if (d < 1 || d > t->ndim)
            luaL_argerror(L, arg, lua_pushfstring(L, "%s: dim entry %d (%I) is out of range 1..%d", what, i,
                                                  lua_tointeger(L, -1), t->ndim));
        dims[i - 1] = (int)d - 1;
        lua_pop(L, 1);
    }
    return n;
}

/* A number or a tensor at idx as a core operand. */
static spk_operand check_operand(lua_State *L, int idx)
{
    spk_operand o = {NULL, spk_scalar_int(0)};
    if (lua_type(L, idx) == LUA_TNUMBER)
        o.scalar = spk_lua_toscalar(L, idx);
    else if (luaL_testudata(L, idx, SPK_TENSOR_MT))
        o.tensor = spk_lua_checktensor(L, idx);
    else
        spk_lua_typeerror(L, idx, "tensor or number");
    return o;
}

/* The tensors of the list at arg, 1 .. n (a C array the caller frees). */
static const spk_tensor **check_tensor_list(lua_State *L, int arg, int *count, const char *what)
{
    luaL_checktype(L, arg, LUA_TTABLE);
    int n = spk_lua_rawcount(L, arg);
    if (n == 0)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s: the list of tensors is empty", what));
    for (int i = 1; i <= n; i++) { /* every entry checked before a pointer is taken */
        lua_rawgeti(L, arg, i);
        spk_lua_tensor *u = luaL_testudata(L, -1, SPK_TENSOR_MT);
        if (!u || !u->t)
            luaL_argerror(L, arg, lua_pushfstring(L, "entry %d is %s%s, expected a tensor", i, u ? "" : "a ",
                                                  u ? "a closed tensor" : spk_lua_typename(L, -1)));
        lua_pop(L, 1);
    }
    size_t entries = n > 0 ? (size_t)n : 1;
    const spk_tensor **list = calloc(entries, sizeof *list);
    if (!list)
        luaL_error(L, "%s: out of memory for a list of %d tensors", what, n);
    for (int i = 1; i <= n; i++) { /* no allocation from here to the caller's core call */
        lua_rawgeti(L, arg, i);
        list[i - 1] = spk_lua_totensor(L, -1);
        lua_pop(L, 1);
    }
    *count = n;
    return list;
}

/* ---- module functions ---- */

static int module_empty(lua_State *L)
{
    int ndim;
    int64_t shape[SPK_MAX_DIMS];
    int next = spk_lua_checkshape(L, 1, &ndim, shape, false);
    spk_dtype dtype = spk_lua_optdtype(L, next, SPK_F32);
    spk_lua_check_end(L, next + 1);
    spk_lua_pushtensor(L, spk_tensor_new(dtype, ndim, shape));
    return 1;
}

static int module_linspace(lua_State *L)
{
    double start = luaL_checknumber(L, 1), stop = luaL_checknumber(L, 2);
    int dtype_arg = lua_type(L, 3) == LUA_TNUMBER ? 4 : 3;
    lua_Integer num = dtype_arg == 4 ? luaL_checkinteger(L, 3) : 50;
    if (num < 0)
        luaL_argerror(L, 3, lua_pushfstring(L, "num must be >= 0, got %I", num));
    spk_dtype dtype = spk_lua_optdtype(L, dtype_arg, SPK_F32);
    spk_lua_pushtensor(L, spk_tensor_linspace(dtype, start, stop, (int64_t)num));
    return 1;
}

static int module_eye(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    int dtype_arg = lua_type(L, 2) == LUA_TNUMBER ? 3 : 2;
    lua_Integer m = dtype_arg == 3 ? luaL_checkinteger(L, 2) : n;
    if (n < 0 || m < 0)
        luaL_argerror(L, n < 0 ? 1 : 2, "sizes must be >= 0");
    spk_dtype dtype = spk_lua_optdtype(L, dtype_arg, SPK_F32);
    spk_lua_pushtensor(L, spk_tensor_eye(dtype, (int64_t)n, (int64_t)m));
    return 1;
}

/* cat(list[, dim = 1]) and stack(list[, dim = 1]): dim 1..ndim (cat) or
 * 1..ndim + 1 (stack: the new dim), negative from the end. */
static int join(lua_State *L, bool stack)
{
    const char *what = stack ? "stack" : "cat";
    int count;
    /* the dim is read first: reading it may allocate, the list's pointers must come after */
    lua_Integer d = luaL_optinteger(L, 2, 1);
    const spk_tensor **list = check_tensor_list(L, 1, &count, what);
    int ndim = list[0]->ndim + (stack ? 1 : 0);
    lua_Integer dim = d < 0 ? d + ndim + 1 : d;
    if (dim < 1 || dim > ndim || ndim == 0) {
        free(list);
        return luaL_argerror(L, 2, lua_pushfstring(L, "dim %I out of range 1..%d", d, ndim));
    }
    spk_tensor *out = stack ? spk_tensor_stack(count, list, (int)dim - 1) : spk_tensor_cat(count, list, (int)dim - 1);
    free(list);
    spk_lua_pushtensor(L, out);
    return 1;
}

static int module_cat(lua_State *L) { return join(L, false); }
static int module_stack(lua_State *L) { return join(L, true); }

static int module_where(lua_State *L)
{
    spk_lua_checktensor(L, 1);
    check_operand(L, 2);
    check_operand(L, 3);
    /* pointers taken after every check (a type error's message allocates) */
    spk_operand a = check_operand(L, 2), b = check_operand(L, 3);
    spk_lua_pushtensor(L, spk_tensor_where(spk_lua_checktensor(L, 1), a, b));
    return 1;
}

static int matmul(lua_State *L)
{
    spk_lua_checktensor(L, 1);
    spk_lua_checktensor(L, 2);
    spk_lua_pushtensor(L, spk_tensor_matmul(spk_lua_checktensor(L, 1), spk_lua_checktensor(L, 2)));
    return 1;
}

static int unary(lua_State *L, spk_unary f)
{
    spk_lua_pushtensor(L, spk_tensor_unary(f, spk_lua_checktensor(L, 1)));
    return 1;
}

static int fn_exp(lua_State *L) { return unary(L, SPK_FN_EXP); }
static int fn_log(lua_State *L) { return unary(L, SPK_FN_LOG); }
static int fn_sqrt(lua_State *L) { return unary(L, SPK_FN_SQRT); }
static int fn_isnan(lua_State *L) { return unary(L, SPK_FN_ISNAN); }
static int fn_isfinite(lua_State *L) { return unary(L, SPK_FN_ISFINITE); }

static int fn_abs(lua_State *L)
{
    spk_lua_pushtensor(L, spk_tensor_abs(spk_lua_checktensor(L, 1)));
    return 1;
}

int spk_lua_print_digits(lua_State *L)
{
    int isint = 0;
    spk_lua_rawfield(L, LUA_REGISTRYINDEX, PRINT_DIGITS_KEY);
    lua_Integer d = lua_tointegerx(L, -1, &isint);
    lua_pop(L, 1);
    return isint && d >= 0 && d <= 17 ? (int)d : 0;
}

static const char *const print_keys[] = {"digits", NULL};

/* print_options([{digits = n}]) -> the options before: n significant
 * digits (1..17), 0 for the shortest form that reads back exactly. */
static int module_print_options(lua_State *L)
{
    int before = spk_lua_print_digits(L);
    if (!lua_isnoneornil(L, 1)) {
        luaL_checktype(L, 1, LUA_TTABLE);
        spk_lua_checkkeys(L, 1, print_keys, "print_options");
        if (spk_lua_rawfield(L, 1, "digits") != LUA_TNIL) {
            int isint = 0;
            lua_Integer d = lua_tointegerx(L, -1, &isint);
            if (!isint || lua_type(L, -1) != LUA_TNUMBER || d < 0 || d > 17)
                luaL_argerror(L, 1, lua_pushfstring(L, "digits must be an integer 0..17 (0: the shortest exact "
                                                       "form), got %s", spk_lua_describe(L, -1)));
            lua_setfield(L, LUA_REGISTRYINDEX, PRINT_DIGITS_KEY);
        } else {
            lua_pop(L, 1);
        }
    }
    lua_createtable(L, 0, 1);
    lua_pushinteger(L, before);
    lua_setfield(L, -2, "digits");
    return 1;
}

/* format_float(x[, dtype = "f64"[, digits]]): x as tostring(t) writes an
 * element of that dtype (digits: the print option's by default). */
static int module_format_float(lua_State *L)
{
    double v = luaL_checknumber(L, 1);
    spk_dtype dtype = spk_lua_optdtype(L, 2, SPK_F64);
    if (dtype != SPK_F32 && dtype != SPK_F64)
        luaL_argerror(L, 2, "a float dtype, f32 or f64");
    lua_Integer digits = luaL_optinteger(L, 3, spk_lua_print_digits(L));
    if (digits < 0 || digits > 17)
        luaL_argerror(L, 3, lua_pushfstring(L, "digits must be 0..17 (0: the shortest exact form), got %I", digits));
    char text[64];
    lua_pushstring(L, spk_format_float(dtype == SPK_F32 ? (double)(float)v : v, dtype, (int)digits, text, sizeof text));
    return 1;
}

/* ---- methods ---- */

int spk_lua_reduce_dims(lua_State *L, spk_reduction r, double p, int arg)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    int dims[SPK_MAX_DIMS];
    int n = read_dims(L, arg, t, dims, spk_reduction_name(r));
    bool keepdim = spk_lua_optkeepdim(L, arg + 1);
    t = spk_lua_checktensor(L, 1);
    spk_lua_pushtensor(L, spk_tensor_reduce_dims(t, r, n, dims, keepdim, p));
    return 1;
}

/* any([dim[, keepdim]]) and all(...): a boolean for the whole tensor, else
 * an i32 tensor of 1 and 0. */
static int truth(lua_State *L, spk_reduction r)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    if (lua_type(L, 2) == LUA_TTABLE)
        return spk_lua_reduce_dims(L, r, 0, 2);
    int dim = spk_lua_optreducedim(L, 2, t);
    bool keepdim = spk_lua_optkeepdim(L, 3);
    if (dim == SPK_ALL_DIMS && !keepdim) {
        spk_scalar v;
        if (spk_tensor_reduce_value(t, r, 0, &v) != 0)
            return spk_lua_fail(L);
        lua_pushboolean(L, v.i != 0);
        return 1;
    }
    spk_lua_pushtensor(L, spk_tensor_reduce(t, r, dim, keepdim, 0, NULL));
    return 1;
}

static int tensor_any(lua_State *L) { return truth(L, SPK_RED_ANY); }
static int tensor_all(lua_State *L) { return truth(L, SPK_RED_ALL); }

static int tensor_squeeze(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    int dim = lua_isnoneornil(L, 2) ? SPK_ALL_DIMS : spk_lua_checkdim(L, 2, t);
    spk_lua_pushtensor(L, spk_tensor_squeeze(t, dim));
    return 1;
}

/* unsqueeze(dim): the new dim's place, 1..ndim + 1 (negative from the end:
 * -1 appends), as NumPy's expand_dims. */
static int tensor_unsqueeze(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    lua_Integer d = luaL_checkinteger(L, 2);
    lua_Integer at = d < 0 ? d + t->ndim + 2 : d;
    if (at < 1 || at > t->ndim + 1)
        luaL_argerror(L, 2, lua_pushfstring(L, "dim %I out of range 1..%d (or -%d..-1)", d, t->ndim + 1,
                                            t->ndim + 1));
    spk_lua_pushtensor(L, spk_tensor_unsqueeze(t, (int)at - 1));
    return 1;
}

/* permute(d1, d2, ...) or permute{d1, d2, ...}: dim k of the result is
 * input dim dk. */
static int tensor_permute(lua_State *L)
{
    spk_tensor *t = spk_lua_checktensor(L, 1);
    int dims[SPK_MAX_DIMS], n;
    if (lua_type(L, 2) == LUA_TTABLE) {
        n = spk_lua_rawcount(L, 2);
        if (n != t->ndim)
            luaL_argerror(L, 2, lua_pushfstring(L, "permute: %d dims for a %d-d tensor (name each dim once)", n,
                                                t->ndim));
        if (n > 0)
            read_dims(L, 2, t, dims, "permute");
        spk_lua_check_end(L, 3);
    } else {
        n = 0;
        while (n < SPK_MAX_DIMS && lua_type(L, n + 2) == LUA_TNUMBER) {
            dims[n] = spk_lua_checkdim(L, n + 2, t);
            n++;
        }
        spk_lua_check_end(L, n + 2);
        if (n != t->ndim)
            return luaL_error(L, "permute: %d dims for a %d-d tensor (name each dim once)", n, t->ndim);
    }
    t = spk_lua_checktensor(L, 1);
    spk_lua_pushtensor(L, spk_tensor_permute(t, dims));
    return 1;
}

static const spk_lua_checked_reg methods[] = {
    {"exp", fn_exp, "t:exp() -> tensor\nElementwise e^t: f32 stays f32, other dtypes give f64 (as NumPy's exp).", ""},
    {"log", fn_log, "t:log() -> tensor\nElementwise natural logarithm (of a negative number NaN, of 0 -Inf); f32 stays f32, else f64.",
     ""},
    {"sqrt", fn_sqrt, "t:sqrt() -> tensor\nElementwise square root (of a negative number NaN); f32 stays f32, else f64.", ""},
    {"isnan", fn_isnan, "t:isnan() -> tensor\nElementwise: i32 1 where t is NaN, else 0.", ""},
    {"isfinite", fn_isfinite, "t:isfinite() -> tensor\nElementwise: i32 1 where t is neither NaN nor +-Inf, else 0.", ""},
    {"any", tensor_any,
     "t:any([dim[, keepdim]]) -> boolean | tensor\nWhether an element is non-zero (NaN is): for the whole tensor a boolean, over dim (or a\nlist of dims) an i32 tensor of 1 and 0.",
     "dim, keepdim"},
    {"all", tensor_all,
     "t:all([dim[, keepdim]]) -> boolean | tensor\nWhether every element is non-zero: for the whole tensor a boolean, over dim (or a list of\ndims) an i32 tensor of 1 and 0.",
     "dim, keepdim"},
    {"mm", matmul,
     "t:mm(u) -> tensor\nThe matrix product t @ u, as spk.matmul (NumPy's matmul: 1-d operands are vectors, more dims batches).",
     "other"},
    {"matmul", matmul, "t:matmul(u) -> tensor\nThe matrix product t @ u: spk.matmul(t, u).", "other"},
    {"squeeze", tensor_squeeze,
     "t:squeeze([dim]) -> view\nWithout dim every size-1 dim removed; with one, that dim (which must have size 1).", "dim"},
    {"unsqueeze", tensor_unsqueeze,
     "t:unsqueeze(dim) -> view\nA size-1 dim inserted to be dim `dim` of the result (1..ndim + 1; -1 appends one).", "dim"},
    {"permute", tensor_permute,
     "t:permute(d1, d2, ...) -> view\nThe dims reordered: dim k of the result is dim dk of t (every dim once; also permute{...}).",
     "dims..."},
    {NULL, NULL, NULL, NULL},
};

static const spk_lua_checked_reg functions[] = {
    {"empty", module_empty,
     "spk.empty(shape[, dtype = \"f32\"]) -> tensor\nA host tensor for results to be written into: NumPy's empty, zero-filled here (as zeros).",
     "shape..., dtype"},
    {"linspace", module_linspace,
     "spk.linspace(start, stop[, num = 50][, dtype = \"f32\"]) -> tensor\n"
     "num evenly spaced values from start to stop, both included, as NumPy's linspace (f32 or f64).",
     "start, stop, num, dtype"},
    {"eye", module_eye,
     "spk.eye(n[, m = n][, dtype = \"f32\"]) -> tensor\nThe n x m tensor with ones on the main diagonal, zeros elsewhere.",
     "n, m, dtype"},
    {"cat", module_cat,
     "spk.cat({t1, t2, ...}[, dim = 1]) -> tensor\n"
     "The tensors joined along dim (every other size equal), as NumPy's concatenate; mixed dtypes give f64.",
     "tensors, dim"},
    {"stack", module_stack,
     "spk.stack({t1, t2, ...}[, dim = 1]) -> tensor\n"
     "The tensors (of one shape) joined along a new dim at position dim (1..ndim + 1), as NumPy's stack.",
     "tensors, dim"},
    {"where", module_where,
     "spk.where(cond, a, b) -> tensor\n"
     "a where cond is non-zero, else b (tensors or numbers), the three broadcast, as NumPy's where.",
     "cond, a, b"},
    {"matmul", matmul,
     "spk.matmul(a, b) -> tensor\n"
     "The matrix product a @ b, as NumPy's matmul: 1-d operands are vectors, dims before the last two are\n"
     "batches (broadcast); float products accumulate in f64, rounded once to the promoted dtype.",
     "a, b"},
    {"exp", fn_exp, "spk.exp(t) -> tensor\nElementwise e^t, as t:exp().", "t"},
    {"log", fn_log, "spk.log(t) -> tensor\nElementwise natural logarithm, as t:log().", "t"},
    {"sqrt", fn_sqrt, "spk.sqrt(t) -> tensor\nElementwise square root, as t:sqrt().", "t"},
    {"abs", fn_abs, "spk.abs(t) -> tensor\nElementwise absolute value, as t:abs().", "t"},
    {"isnan", fn_isnan, "spk.isnan(t) -> tensor\nElementwise i32 1 where t is NaN, as t:isnan().", "t"},
    {"isfinite", fn_isfinite, "spk.isfinite(t) -> tensor\nElementwise i32 1 where t is finite, as t:isfinite().", "t"},
    {"format_float", module_format_float,
     "spk.format_float(x[, dtype = \"f64\"[, digits]]) -> text\n"
     "x as tostring(tensor) writes an element of that dtype: to `digits` significant digits (by default\n"
     "spk.print_options's), 0 meaning the fewest that read back as the same value.",
     "x, dtype, digits"},
    {"print_options", module_print_options,
     "spk.print_options([{digits = n}]) -> the options before\n"
     "How tostring(t) prints floats: n significant digits (1..17), or 0, the default, for the shortest form\n"
     "that reads back as the same value (so two values that differ print differently).",
     "options"},
    {NULL, NULL, NULL, NULL},
};

void spk_open_tensor_math(lua_State *L, int module)
{
    spk_lua_push_tensor_methods(L);
    spk_lua_setfuncs_checked(L, methods, &spk_lua_tensor_self);
    lua_pop(L, 1);
    spk_lua_register(L, module, functions, NULL);
}
