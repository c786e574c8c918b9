"""NumPy's answer for each case spk computed (tests/spec/tensor_numpy_spec.lua).

Usage: python3 tensor_numpy_check.py CASES.jsonl

Each line of CASES is one case: the operands (a base tensor's dtype, shape and
values, then the views spk took of it, in spk's 1-based terms), the operation
and what spk gave (a tensor's dtype, shape and values, a Lua number, or an
error). This script rebuilds the operands from the documented meaning of each
view (not from spk's code), asks NumPy, and prints one line per disagreement,
"FAIL <id> <what differs>", then "checked <n> cases".

What spk documents differently from NumPy (src/core/tensor.h) is mapped, not
skipped: comparisons give i32 0/1 where NumPy gives bool; argmin/argmax give
1-based i32 positions where NumPy gives 0-based int64; a sum of i32 is f64
where NumPy's is int64; the mean of an empty tensor (no dim) is an error
where NumPy warns and gives NaN; the +Inf norm of nothing is 0, as NumPy 2.3
and later give it, whichever NumPy runs this (earlier versions raise); a Lua integer beside a u64 tensor is the
u64 of the same bits (-1 is 2^64 - 1), as spk reads and writes u64 values
past 2^63; norms accumulate in f64 (NumPy's f64 norm,
rounded to f32 for f32 tensors, is the reference). Scalars follow NumPy 2's rules (NEP 50),
which NumPy 1.24 offers as the "weak" promotion state.
"""
import json
import math
import sys
import warnings

import numpy as np

if hasattr(np, "_set_promotion_state"):  # NumPy 1.24 - 1.26; NumPy 2 is weak already
    np._set_promotion_state("weak")
warnings.simplefilter("ignore")  # NumPy warns on 0/0, overflow and empty means
np.seterr(all="ignore")

DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "u64": np.uint64}
NAMES = {np.dtype(v): k for k, v in DTYPES.items()}
EPS = {"f32": float(np.finfo(np.float32).eps), "f64": float(np.finfo(np.float64).eps)}


def build(operand):
    dtype = DTYPES[operand["dtype"]]
    values = [int(v) if isinstance(v, str) else v for v in operand["data"]]  # u64 arrive as text
    x = np.array(values, dtype=np.float64 if dtype in (np.float32, np.float64) else object)
    x = x.astype(dtype).reshape(operand["shape"])
    for view in operand["views"]:
        x = apply_view(x, view)
    return x


def axis_of(x, dim):
    """spk's 1-based dim (negative from the end) as a NumPy axis."""
    return dim - 1 if dim > 0 else x.ndim + dim


def apply_view(x, view):
    """One view, by basic indexing: the result shares x's memory, as spk's does."""
    name, args = view[0], view[1:]
    if name == "transpose":
        return np.swapaxes(x, axis_of(x, args[0]), axis_of(x, args[1]))
    if name == "index":  # x[i]: dim 1, 1-based, negative from the end
        i = args[0]
        return x[i - 1 if i > 0 else i]
    axis = axis_of(x, args[0])
    size = x.shape[axis]
    before = (slice(None),) * axis
    if name == "narrow":  # start (1-based), length
        return x[before + (slice(args[1] - 1, args[1] - 1 + args[2]),)]
    if name == "select":  # index (1-based); the dim goes
        return x[before + (args[1] - 1,)]
    if name == "slice":  # first, last inclusive (negative from the end), step
        first, last, step = args[1], args[2], args[3]
        f = size + first + 1 if first < 0 else first
        l = size + last + 1 if last < 0 else last
        if step > 0:
            return x[before + (slice(f - 1, l, step),)]
        # walks down from first to last, both inclusive
        return x[before + (slice(f - 1, l - 2 if l >= 2 else None, step),)]
    raise ValueError("unknown view " + name)


BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
}
COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge"}
EXACT = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


def scalar_value(case):
    v = case["scalar"]
    return float(v) if case.get("scalar_float") else int(v)


def expected(case):
    """(kind, value, dtype name, aux): kind 'tensor', 'number' or 'error'."""
    op = case["op"]
    if op == "assign":  # base[views][i] = value; the whole base is the result
        base = build(dict(case["a"], views=[]))
        target = base
        for view in case["a"]["views"]:
            target = apply_view(target, view)
        i = case["index"]
        value = build(case["b"]) if "b" in case else scalar_value(case)
        target[i - 1 if i > 0 else i] = value
        return "tensor", base, case["a"]["dtype"], None
    a = build(case["a"])
    if op == "view":
        return "tensor", a, case["a"]["dtype"] if a.dtype == DTYPES[case["a"]["dtype"]] else None, None
    if op in ("neg", "abs"):
        r = np.negative(a) if op == "neg" else np.abs(a)
        return "tensor", r, NAMES[r.dtype], None
    if op in BINARY:
        if "scalar" in case:
            s = scalar_value(case)
            if isinstance(s, int) and a.dtype == np.uint64:
                s %= 1 << 64  # a Lua integer beside a u64 is the u64 of its bits (src/core/tensor.h)
            if op in COMPARISONS and isinstance(s, int) and a.dtype.kind in "iu":
                # NumPy 2 compares Python integers exactly whatever their size
                r = np.array([EXACT[op](int(v), s) for v in a.reshape(-1).tolist()], dtype=bool).reshape(a.shape)
            else:
                r = BINARY[op](s, a) if case.get("scalar_first") else BINARY[op](a, s)
        else:
            r = BINARY[op](a, build(case["b"]))
        r = np.asarray(r)
        if op in COMPARISONS:
            return "tensor", r.astype(np.int32), "i32", None
        return "tensor", r, NAMES[r.dtype], None
    return reduction(case, a)


def reduction(case, a):
    op, dim, keepdim, p = case["op"], case.get("dim"), bool(case.get("keepdim")), case.get("p")
    whole = dim is None and not keepdim
    axis = None if dim is None else axis_of(a, dim)
    if axis is not None and not 0 <= axis < a.ndim:
        raise ValueError("dim %d is out of range for %d dims" % (dim, a.ndim))
    if op == "sum":
        r = np.sum(a, axis=axis, keepdims=keepdim)
        name = "f64" if a.dtype == np.int32 else NAMES[np.asarray(r).dtype]
    elif op == "mean":
        if whole and a.size == 0:
            raise ValueError("spk: mean of an empty tensor is an error")
        r = np.mean(a, axis=axis, keepdims=keepdim)
        name = NAMES[np.asarray(r).dtype]
    elif op in ("min", "max", "argmin", "argmax"):
        f = {"min": np.amin, "max": np.amax, "argmin": np.argmin, "argmax": np.argmax}[op]
        r = f(a, axis=axis, keepdims=keepdim)
        name = "i32" if op.startswith("arg") else NAMES[np.asarray(r).dtype]
        if op.startswith("arg"):
            r = np.asarray(r) + 1
        if op in ("min", "max") and not whole:
            g = np.argmin if op == "min" else np.argmax
            positions = np.asarray(g(a, axis=axis, keepdims=keepdim)) + 1
            return "tensor", np.asarray(r), name, positions
    elif op == "norm":
        p = {"inf": math.inf, "-inf": -math.inf}.get(p, p)
        empty = a.size == 0 if dim is None else a.shape[axis] == 0
        if p == math.inf and empty:
            # NumPy 2.3 and later give 0 (the empty vector's norm), earlier
            # versions raise for an empty max; spk follows NumPy 2.3, whatever
            # NumPy is installed
            shape = (1,) * a.ndim if dim is None else np.delete(np.array(a.shape), axis).tolist()
            if dim is not None and keepdim:
                shape = list(a.shape)
                shape[axis] = 1
            r = np.zeros(() if whole else tuple(shape))
            name = "f32" if a.dtype == np.float32 else "f64"
            if whole:
                return "number", 0.0, name, None
            return "tensor", r.astype(np.float32 if name == "f32" else np.float64), name, None
        # spk accumulates every norm in f64 (tensor.h): an f32 norm is NumPy's
        # f64 norm rounded once, where NumPy's own f32 one squares in f32
        # (1e30 gives Inf there); the dtype stays NumPy's.
        x = a.astype(np.float64)
        if dim is None:
            r = np.linalg.norm(x.reshape(-1), ord=p)
            if keepdim:
                r = np.asarray(r).reshape((1,) * a.ndim)
        else:
            r = np.linalg.norm(x, ord=p, axis=axis, keepdims=keepdim)
        name = NAMES[np.linalg.norm(a.reshape(-1)[:1] if a.size else np.zeros(1, a.dtype)).dtype]
        if name == "f32" and not whole:
            r = np.asarray(r).astype(np.float32)
    else:
        raise ValueError("unknown op " + op)
    if whole:
        return "number", r, name, None
    return "tensor", np.asarray(r), name, None


def tolerance(case, a, expect, dtype):
    """How far a reduction's float result may be from NumPy's (of dtype), per element."""
    eps = EPS.get(dtype, EPS["f64"])
    if case["op"] in ("sum", "mean"):
        # both sum in a different order: bounded by the sum of |x| of the group
        dim, keepdim = case.get("dim"), bool(case.get("keepdim"))
        axis = None if dim is None else axis_of(a, dim)
        scale = np.sum(np.abs(a.astype(np.float64)), axis=axis, keepdims=keepdim)
        if case["op"] == "mean":
            n = a.size if axis is None else a.shape[axis]
            scale = scale / max(n, 1)
        return 8 * eps * (np.asarray(scale, dtype=np.float64) + np.abs(np.asarray(expect, dtype=np.float64)))
    if case["op"] == "norm":
        n = a.size if case.get("dim") is None else a.shape[axis_of(a, case["dim"])]
        return 4 * (n + 8) * eps * np.abs(np.asarray(expect, dtype=np.float64)) + 1e-300
    return 0


def same_values(got, want, tol, signs=False):
    got = np.asarray(got, dtype=np.float64) if want.dtype.kind == "f" else np.asarray(got, dtype=object)
    if want.dtype.kind != "f":
        return [int(g) for g in got.reshape(-1)] == [int(w) for w in want.reshape(-1).tolist()]
    w = want.astype(np.float64)
    bad = np.zeros(w.shape, dtype=bool)
    nan = np.isnan(w)
    bad |= nan != np.isnan(got)
    inf = np.isinf(w)
    bad |= inf & (got != w)
    finite = ~nan & ~inf
    with np.errstate(all="ignore"):
        diff = np.abs(got - w)
    limit = np.broadcast_to(np.asarray(tol, dtype=np.float64), w.shape)
    bad |= finite & ~(diff <= limit)
    if signs:  # elementwise results are exact: signed zeros too
        bad |= finite & (np.signbit(got) != np.signbit(w))
    return not bad.any()


def got_array(result, dtype):
    values = [int(v) if isinstance(v, str) else v for v in result["data"]]
    if DTYPES[dtype] in (np.float32, np.float64):
        return np.array(values, dtype=np.float64).reshape(result["shape"])
    return np.array(values, dtype=object).reshape(result["shape"])


def check(case):
    result = case["result"]
    try:
        kind, want, dtype, positions = expected(case)
    except (ValueError, TypeError, OverflowError, IndexError) as e:
        if "error" in result:
            return None
        return "NumPy refuses it (%s: %s) but spk gave a result" % (type(e).__name__, e)
    if "error" in result:
        return "spk refused it (%s) but NumPy gives %s %s" % (result["error"], dtype, np.asarray(want).tolist())
    a = build(case["a"])
    if kind == "number":
        got = result.get("number")
        if got is None:
            return "spk gave a %s, NumPy a number" % ("tensor" if "data" in result else "nothing")
        integer = (a.dtype.kind in "iu" and case["op"] in ("sum", "min", "max")) or case["op"].startswith("arg")
        if integer != (result.get("lua_type") == "integer"):
            return "spk gave a Lua %s, NumPy a %s value" % (result.get("lua_type"), dtype)
        if isinstance(got, str):
            got = int(got)
        w = np.asarray(want)
        # whole-tensor values are computed in f64 and not rounded (tensor.h)
        tol = tolerance(case, a, w, dtype) if w.dtype.kind == "f" else 0
        if not same_values(np.asarray([got]), w.reshape(1).astype(w.dtype), np.asarray(tol).reshape(-1)):
            return "value %r, NumPy %r" % (got, w.tolist())
        return None
    if "dtype" not in result:
        return "spk gave a number, NumPy a %s tensor" % dtype
    if result["dtype"] != dtype:
        return "dtype %s, NumPy's (mapped) %s" % (result["dtype"], dtype)
    want = np.asarray(want)
    if list(result["shape"]) != list(want.shape):
        return "shape %s, NumPy %s" % (result["shape"], list(want.shape))
    elementwise = case["op"] not in ("sum", "mean", "min", "max", "argmin", "argmax", "norm")
    if not same_values(got_array(result, dtype), want, tolerance(case, a, want, dtype), signs=elementwise):
        return "values %s, NumPy %s" % (result["data"], want.reshape(-1).tolist())
    if positions is not None:
        second = case.get("positions")
        if second is None or list(second["shape"]) != list(positions.shape) or \
                [int(v) for v in second["data"]] != positions.reshape(-1).tolist():
            return "positions %s, NumPy %s" % (second and second["data"], positions.reshape(-1).tolist())
    return None


# ---- NumPy's other everyday functions (the spec's second block) ----
#
# linspace, eye, empty, cat, stack, where, exp, log, sqrt, abs, isnan,
# isfinite, any, all, matmul, squeeze, unsqueeze, permute, ** and %, and
# reductions over a list of dims. Mapped where spk documents a difference
# (src/core/tensor.h): booleans are i32 1/0 (a whole-tensor any/all a Lua
# boolean), two integer numbers in where give i32, spk has at most 8 dims,
# linspace gives floats only, empty is zero-filled, and matmul's float
# products accumulate in f64 (NumPy's f64 product is the reference, within
# the rounding of a k-term sum).

UNARY_MORE = {"fn_exp": np.exp, "fn_log": np.log, "fn_sqrt": np.sqrt, "fn_isnan": np.isnan,
              "fn_isfinite": np.isfinite, "fn_abs": np.abs}
REDUCE_MORE = {"reduce_" + r for r in ("sum", "mean", "min", "max", "norm", "any", "all")}
MORE_OPS = set(UNARY_MORE) | REDUCE_MORE | {"pow", "mod", "where", "matmul", "cat", "stack", "squeeze",
                                            "unsqueeze", "permute", "linspace", "eye", "empty"}
MAX_DIMS = 8


def weak_dtype(dtype, s):
    """NEP 50: the dtype a Python number takes beside an array of dtype."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return dtype
    if isinstance(s, float):
        return np.dtype(np.float64)
    info = np.iinfo(dtype)
    if not info.min <= s <= info.max:
        raise OverflowError("Python integer %d out of bounds for %s" % (s, dtype))
    return dtype


def c99_pow_of_minus_inf(case, a, r):
    """(-Inf) ** y for a y that is no integer: C99's pow (spk's) gives +Inf for y > 0 and +0 for
    y < 0; some NumPy builds' vectorised power give NaN there."""
    if "scalar" in case:
        s = np.float64(scalar_value(case))
        base, y = (s, a) if case.get("scalar_first") else (a, s)
    else:
        base, y = a, build(case["b"])
    base, y = np.broadcast_arrays(np.asarray(base, dtype=np.float64), np.asarray(y, dtype=np.float64))
    with np.errstate(all="ignore"):
        odd = np.isneginf(base) & np.isfinite(y) & (y != np.floor(y))
    if not odd.any():
        return r
    r = np.array(r, copy=True)
    r[odd] = np.where(y[odd] > 0, np.inf, 0.0)
    return r


def side(case, name):
    """A where operand: an array, or a Python number."""
    if name in case:
        return build(case[name])
    v = case[name + "_scalar"]
    return float(v) if case[name + "_float"] else int(v)


def where_dtype(a, b):
    arrays = [x for x in (a, b) if isinstance(x, np.ndarray)]
    if len(arrays) == 2:
        return np.result_type(a, b)
    if len(arrays) == 1:
        return weak_dtype(arrays[0].dtype, b if arrays[0] is a else a)
    small = all(isinstance(x, int) and -2**31 <= x < 2**31 for x in (a, b))
    return np.dtype(np.int32 if small else np.float64)


def fits(shape):
    if len(shape) > MAX_DIMS:
        raise ValueError("spk has at most %d dims" % MAX_DIMS)


def vector_norm(x, p, axes, keepdim):
    """The p-norm over `axes` (NumPy's vector norms, in f64)."""
    x = np.asarray(x, dtype=np.float64)
    axes = tuple(range(x.ndim)) if axes is None else axes
    kept = [d for d in range(x.ndim) if d not in axes]
    count = int(np.prod([x.shape[d] for d in axes]))
    moved = np.transpose(x, kept + list(axes)).reshape([x.shape[d] for d in kept] + [count])
    if moved.shape[-1] == 0 and math.isinf(p):
        raise ValueError("norm with p = +-inf over nothing")
    r = np.linalg.norm(moved, ord=p, axis=-1) if moved.shape[-1] else np.zeros(moved.shape[:-1])
    if keepdim:
        r = np.asarray(r).reshape([1 if d in axes else x.shape[d] for d in range(x.ndim)])
    return np.asarray(r)


def reduce_more(case, a):
    op = case["op"][len("reduce_"):]
    dims, keepdim = case.get("dims"), bool(case.get("keepdim"))
    axes = None if dims is None else tuple(axis_of(a, d) for d in dims)
    if op == "norm":
        p = {"inf": math.inf, "-inf": -math.inf}.get(case["p"], case["p"])
        return vector_norm(a, p, axes, keepdim), "f32" if a.dtype == np.float32 else "f64"
    if op in ("min", "max") and (a.size == 0 if axes is None else any(a.shape[x] == 0 for x in axes)):
        raise ValueError("min/max over nothing")
    f = {"sum": np.sum, "mean": np.mean, "min": np.amin, "max": np.amax, "any": np.any, "all": np.all}[op]
    r = np.asarray(f(a, axis=axes, keepdims=keepdim))
    if op in ("any", "all"):
        return r.astype(np.int32), "i32"
    if op == "sum" and a.dtype == np.int32:
        return r, "f64"
    return r, NAMES[r.dtype]


def expected_more(case):
    """(value, dtype name, tolerance kind): 'exact', 'signs' (exact, zeros' signs too), 'ulp' or 'sum'."""
    op = case["op"]
    if op == "linspace":
        dtype = "f32" if case["dtype"] == "nil" else case["dtype"]
        if dtype not in ("f32", "f64"):
            raise ValueError("spk's linspace gives floats only")
        r = np.linspace(case["start"], case["stop"], case["num"], dtype=np.float64).astype(DTYPES[dtype])
        return r, dtype, "signs"
    if op in ("eye", "empty"):
        dtype = "f32" if case["dtype"] == "nil" else case["dtype"]
        r = np.eye(case["n"], case["m"], dtype=DTYPES[dtype]) if op == "eye" else np.zeros(case["shape"], DTYPES[dtype])
        return r, dtype, "exact"
    if op in ("cat", "stack"):
        parts = [build(o) for o in case["list"]]
        ndim = parts[0].ndim + (op == "stack")
        d = case["dim"]
        axis = d - 1 if d > 0 else ndim + d
        if not 0 <= axis < ndim:
            raise ValueError("dim out of range")
        r = np.concatenate(parts, axis=axis) if op == "cat" else np.stack(parts, axis=axis)
        fits(r.shape)
        return r, NAMES[r.dtype], "signs"
    if op == "where":
        cond, a, b = build(case["cond"]), side(case, "a"), side(case, "b")
        # a Lua integer beside a u64 tensor is the u64 of its bits (src/core/tensor.h)
        if isinstance(a, np.ndarray) and a.dtype == np.uint64 and isinstance(b, int):
            b %= 1 << 64
        if isinstance(b, np.ndarray) and b.dtype == np.uint64 and isinstance(a, int):
            a %= 1 << 64
        dtype = where_dtype(a, b)
        # each side converted first: NumPy 1.24's where would meet a number and a u64 in f64
        r = np.where(cond != 0, np.asarray(a).astype(dtype), np.asarray(b).astype(dtype))
        return r, NAMES[dtype], "signs"
    if op == "matmul":
        a, b = build(case["a"]), build(case["b"])
        r = np.matmul(a, b)
        if r.dtype.kind == "f":
            return np.matmul(a.astype(np.float64), b.astype(np.float64)), NAMES[r.dtype], "sum"
        return r, NAMES[r.dtype], "exact"
    a = build(case["a"])
    if op in UNARY_MORE:
        r = np.asarray(UNARY_MORE[op](a))
        if r.dtype == np.bool_:
            return r.astype(np.int32), "i32", "exact"
        return r, NAMES[r.dtype], "ulp" if op in ("fn_exp", "fn_log") else "signs"
    if op in ("pow", "mod"):
        f = np.power if op == "pow" else np.remainder
        if "scalar" in case:
            s = scalar_value(case)
            if isinstance(s, int) and a.dtype == np.uint64:
                s %= 1 << 64  # a Lua integer beside a u64 is the u64 of its bits (src/core/tensor.h)
            weak_dtype(a.dtype, s)  # NumPy 1.24 does not check every case of an integer that does not fit
            r = f(s, a) if case.get("scalar_first") else f(a, s)
        else:
            r = f(a, build(case["b"]))
        r = np.asarray(r)
        if op == "pow" and r.dtype.kind == "f":
            r = c99_pow_of_minus_inf(case, a, r)
        return r, NAMES[r.dtype], "ulp" if op == "pow" else "signs"
    if op == "squeeze":
        return np.squeeze(a, axis=None if case["dim"] is None else axis_of(a, case["dim"])), case["a"]["dtype"], "signs"
    if op == "unsqueeze":
        d = case["dim"]
        axis = d - 1 if d > 0 else a.ndim + 1 + d
        if d == 0 or not 0 <= axis <= a.ndim:
            raise ValueError("dim out of range")
        r = np.expand_dims(a, axis)
        fits(r.shape)
        return r, case["a"]["dtype"], "signs"
    if op == "permute":
        return np.transpose(a, [axis_of(a, d) for d in case["dims"]]), case["a"]["dtype"], "signs"
    r, name = reduce_more(case, a)
    return r, name, "exact" if op in ("reduce_min", "reduce_max", "reduce_any", "reduce_all") else "sum"


def tolerance_more(case, want, dtype, kind):
    eps = EPS.get(dtype, EPS["f64"])
    w = np.abs(np.asarray(want, dtype=np.float64))
    if kind == "ulp":  # two ulps, subnormals included (integer results are exact: same_values)
        tiny = float(np.finfo(np.float32 if dtype == "f32" else np.float64).smallest_subnormal)
        return 2 * eps * w + 2 * tiny
    if kind != "sum":
        return 0
    op = case["op"]
    if op == "matmul":
        a, b = build(case["a"]), build(case["b"])
        k = a.shape[-1]
        with np.errstate(all="ignore"):
            scale = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
        return (k + 2) * eps * scale + 1e-300
    a = build(case["a"])
    dims = case.get("dims")
    axes = None if dims is None else tuple(axis_of(a, d) for d in dims)
    n = a.size if axes is None else int(np.prod([a.shape[x] for x in axes]))
    if op == "reduce_norm":
        return 4 * (n + 8) * eps * w + 1e-300
    scale = np.sum(np.abs(a.astype(np.float64)), axis=axes, keepdims=bool(case.get("keepdim")))
    if op == "reduce_mean":
        scale = scale / max(n, 1)
    return 8 * eps * (np.asarray(scale, dtype=np.float64) + w)


def check_more(case):
    result = case["result"]
    try:
        want, dtype, kind = expected_more(case)
    except (ValueError, TypeError, OverflowError, IndexError) as e:
        if "error" in result:
            return None
        return "NumPy refuses it (%s: %s) but spk gave a result" % (type(e).__name__, e)
    if "error" in result:
        return "spk refused it (%s) but NumPy gives %s %s" % (result["error"], dtype, np.asarray(want).tolist())
    want = np.asarray(want)
    whole = case["op"] in ("reduce_any", "reduce_all") and case.get("dims") is None and not case.get("keepdim")
    if whole:
        if "boolean" not in result:
            return "spk gave %s, NumPy a boolean" % result
        return None if result["boolean"] == bool(want) else "spk %s, NumPy %s" % (result["boolean"], bool(want))
    if "dtype" not in result:
        return "spk gave no tensor (%s), NumPy a %s tensor" % (result, dtype)
    if result["dtype"] != dtype:
        return "dtype %s, NumPy's (mapped) %s" % (result["dtype"], dtype)
    if list(result["shape"]) != list(want.shape):
        return "shape %s, NumPy %s" % (result["shape"], list(want.shape))
    if want.dtype.kind == "f" and DTYPES[dtype] == np.float32 and kind != "sum":
        want = want.astype(np.float32)
    tol = tolerance_more(case, want, dtype, kind)
    if not same_values(got_array(result, dtype), want, tol, signs=kind == "signs"):
        return "values %s, NumPy %s" % (result["data"], want.reshape(-1).tolist())
    return None


def main():
    failures = checked = 0
    with open(sys.argv[1]) as f:
        for line in f:
            case = json.loads(line)
            checked += 1
            try:
                problem = check_more(case) if case.get("op") in MORE_OPS else check(case)
            except Exception as e:  # a bug here is a failure to look at, not a pass
                problem = "checker error %s: %s" % (type(e).__name__, e)
            if problem:
                failures += 1
                print("FAIL %d %s" % (case["id"], problem.replace("\n", " ")[:400]))
    print("checked %d cases, %d failed" % (checked, failures))


if __name__ == "__main__":
    main()
