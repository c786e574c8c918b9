/* spk's auxiliary library for its Lua bindings, in the manner of Lua's own
 * lauxlib: every check a binding makes of its arguments and their messages,
 * the one registration every binding goes through, the userdata types, the
 * tensors' userdata and the failure helper live here (bind.c), and nowhere
 * else. bind.c calls no other file of src/lua (tests/spec/code_shape_spec.lua
 * checks it); every area's bindings (tensor.c, cuda.c, plan.c, ...) build on
 * it. A binding is thin: it checks its arguments, calls one C function and
 * turns its status into a Lua error carrying spk_last_error().
 *
 * The API, for a new binding file:
 *
 *   static int l_thing(lua_State *L)           -- sees only the arguments it declares
 *   static const spk_lua_checked_reg functions[] = {
 *       {"thing", l_thing, "spk.thing(x[, opts]) -> y\nWhat it does.", "x, opts"},
 *       {NULL, NULL, NULL, NULL}};
 *   spk_lua_setfuncs_checked(L, functions, NULL);        -- spk.<name> functions into the table on top
 *   spk_lua_setfuncs_module(L, functions, "spk.cuda");   -- functions of another table
 *   spk_lua_register(L, module, functions, "spk.core");  -- the same into the table at index `module`
 *
 *   static void stream_free(void *s) { spk_stream_release(s); }            -- an open object's pointer
 *   static void stream_tostring(lua_State *L, void *s) { lua_pushfstring(L, ...); }  -- an open one's text
 *   static spk_lua_type stream_type = {.metatable = "spk.cuda.stream", .name = "stream",
 *       .methods = stream_methods, .free = stream_free, .tostring = stream_tostring, .doc = "stream: ..."};
 *   spk_lua_newtype(L, &stream_type);                    -- metatable, methods, close, __gc, __close
 *   void **slot = spk_lua_newobject(L, &stream_type);    -- a new object; store the pointer in *slot
 *   spk_stream *s = spk_lua_checkobject(L, 2, &stream_type);   -- an open one, or a Lua error
 *
 * The readers (each names the argument or key and the value in its
 * message): spk_lua_checktensor, _checkoption (a vocabulary's one list),
 * _checkkeys / _checkoptions (an options table's keys), _intfield,
 * _boolfield, _stringfield, _dim3field, _optfield_*, _checkintegers,
 * _checkshape, _checklayers, _read_trace; the writers: _setint, _setbool,
 * _setstring, _setnumber, _setfields (lstm/fields.h), _push_sorted; the
 * failure helpers spk_lua_fail / spk_lua_check. (For code written against
 * the former lua/args.h and gpu_plan.h: their readers are these, under the
 * same names; the hand-written extra-argument check and the unchecked
 * registration are gone, the parameter list of spk_lua_setfuncs_checked /
 * spk_lua_register does it;
 * spk_lua_checkmodule(L, i) is spk_lua_checkobject(L, i, &spk_lua_module_type)
 * of lua/cuda_area.h; a type frees through `free`; the GPU plans' helpers
 * are plan.c's own.)
 *
 * Every registered function runs behind a check that counts its arguments
 * against its parameter list (trailing nils are no arguments), and a method
 * of an spk_lua_type behind one that argument 1 is an open object of the
 * type, so the function itself never checks either: a method takes its
 * object's pointer once, where it uses it (after any allocation, which may
 * run a finalizer that closes it). The one message an extra argument gets,
 * in C and in Lua (lua/spk/options.lua's takes):
 *
 *     x:add(b, 2)   ->  bad argument #2 to 'add' (unexpected argument (number 2):
 *                       tensor:add takes (other))
 *
 * A parameter list with "..." ("shape..., dtype") takes any number; such a
 * function reads what it takes and then calls spk_lua_check_end with the
 * first argument it did not read. The check runs as the registered function
 * itself (no extra call level), so luaL_argerror's names and method
 * numbering are unchanged; a registered function uses no upvalues of its own.
 *
 * Arguments are read without running Lua code: a binding that has taken a
 * pointer out of a Lua object (a tensor, a plan, a kernel, a stream) must not
 * let Lua code run before its last use of it: __index, __len, __tostring,
 * __eq ... of an argument could close or drop the object. So argument tables
 * are read raw, with the readers below (never lua_getfield, lua_geti,
 * luaL_len, luaL_tolstring: tests/spec/rawargs_spec.lua refuses them in
 * src/lua and src/cli). A collection step can also run Lua code (the __gc of
 * any object), and any allocation may take one: pointers are taken after the
 * allocations that precede their use (these readers make none but for their
 * errors), or the tensor is held (spk_lua_holdtensor). */
#ifndef SPK_LUA_BIND_H
#define SPK_LUA_BIND_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>

#include <lauxlib.h>
#include <lua.h>

#include "core/tensor.h"

/* ---- registration ------------------------------------------------------ */

/* A function and its documentation: the doc's first line is the call as a
 * script writes it ("spk.zeros(shape[, dtype]) -> tensor"), the lines after
 * it say what it does; `params` names its parameters as the extra-argument
 * message shows them ("" for none; with "..." for a list the function
 * checks). */
typedef struct spk_lua_checked_reg {
    const char *name;
    lua_CFunction func;
    const char *doc;
    const char *params;
} spk_lua_checked_reg;

/* The object methods are called on: its name in messages ("tensor:add
 * takes ...") and, for objects that can be closed, whether the one at idx is
 * (a closed self is reported before extra arguments, since it is what is
 * wrong). The methods of an spk_lua_type get more: their object is checked
 * (an open one of the type) before they run. */
typedef struct spk_lua_self {
    const char *name;
    bool (*is_closed)(lua_State *L, int idx); /* may be NULL */
} spk_lua_self;

/* Registers `fns` (ending with a NULL name) into the table at the top of the
 * stack, each behind the argument check, and records each doc (an entry
 * without one is an error when the module loads, so no binding ships
 * undocumented). `self` (static storage) describes the object for methods
 * (argument 1 is self and is not among `params`), or is NULL for spk's own
 * functions, whose messages read "spk.<name> takes (...)". */
void spk_lua_setfuncs_checked(lua_State *L, const spk_lua_checked_reg *fns, const spk_lua_self *self);
/* The same for the functions of a table other than spk (`owner`, static
 * storage: "spk.cuda", "spk.core"), whose messages read "<owner>.<name> takes (...)". */
void spk_lua_setfuncs_module(lua_State *L, const spk_lua_checked_reg *fns, const char *owner);
/* Either of the above into the table at index `table` (owner NULL: spk's own). */
void spk_lua_register(lua_State *L, int table, const spk_lua_checked_reg *fns, const char *owner);
/* Raises the extra-argument error if any argument from `first` on is not nil.
 * For functions whose parameter list ends in "...". */
void spk_lua_check_end(lua_State *L, int first);

/* ---- userdata types ------------------------------------------------------
 * Every spk object is a userdata whose block starts with the pointer it
 * wraps (NULL once closed), behind a metatable named `metatable`. */
typedef struct spk_lua_type {
    const char *metatable;              /* "spk.cuda.stream": the registry key and __name */
    const char *name;                   /* "stream": what messages call it */
    const spk_lua_checked_reg *methods; /* its methods (NULL: none) */
    /* Frees an open object's pointer (NULL: the object is never closed).
     * __gc, __close and the method close take the pointer out of the
     * object first, so each object is freed once, and stays closed. */
    void (*free)(void *object);
    /* Pushes the text of an open object (NULL: Lua's __tostring); a closed
     * one prints `closed` (NULL: "<name> (closed)"). */
    void (*tostring)(lua_State *L, void *object);
    const char *closed;
    lua_CFunction index;                /* fields besides the methods (NULL: the methods alone) */
    const char *doc;                    /* the type's documentation (help) */
    const char *close_doc;              /* close's (NULL: a generic one) */
    spk_lua_self self;                  /* filled by spk_lua_newtype */
    spk_lua_checked_reg close_entry[2]; /* filled by spk_lua_newtype */
} spk_lua_type;

/* Registers the type: its metatable (__gc, __close, __tostring, __index; a
 * methods table, with `index` as __index and the methods in its "methods"
 * field), the methods behind their checks, close where the type has a
 * free, and its doc. `type` must outlive the Lua state (a static). */
void spk_lua_newtype(lua_State *L, spk_lua_type *type);
/* Pushes a new object of the type holding no pointer yet; the caller stores
 * it in the returned slot (a constructor that fails leaves it NULL). */
void **spk_lua_newobject(lua_State *L, const spk_lua_type *type);
/* The open object of the type at idx: its pointer; a Lua error naming the
 * argument when it is none or is closed ("stream is closed"). */
void *spk_lua_checkobject(lua_State *L, int idx, const spk_lua_type *type);
/* The object's pointer, or NULL when the value is not one or is closed. */
void *spk_lua_toobject(lua_State *L, int idx, const spk_lua_type *type);
/* Registers more methods of a registered type, which also serve a closed
 * object (is_closed): argument 1 is checked to be one of the type only. */
void spk_lua_setmethods_any_state(lua_State *L, spk_lua_type *type, const spk_lua_checked_reg *fns);
/* Pushes the methods table of a type, made empty on first use (a registry
 * entry "<metatable>.methods"), so other areas add to it in any order:
 * cuda.c's t:cuda() to the tensor's. spk_lua_push_tensor_methods: the
 * tensor's. */
void spk_lua_push_methods(lua_State *L, const char *metatable);
void spk_lua_push_tensor_methods(lua_State *L);

/* ---- raw readers ---------------------------------------------------------- */

/* Pushes t[key] of the table at idx, read raw by walking its keys (no string
 * is made, so no collection step runs); returns the value's type. */
int spk_lua_rawfield(lua_State *L, int idx, const char *key);
/* Pushes the global `name`, read raw. */
int spk_lua_rawglobal(lua_State *L, const char *name);
/* The raw length of the table at idx, clamped to INT_MAX. */
int spk_lua_rawcount(lua_State *L, int idx);

/* t[key] = v for the table t at the top of the stack (a NULL string: nil). */
void spk_lua_setint(lua_State *L, const char *key, lua_Integer v);
void spk_lua_setbool(lua_State *L, const char *key, bool v);
void spk_lua_setstring(lua_State *L, const char *key, const char *v);
void spk_lua_setnumber(lua_State *L, const char *key, lua_Number v);
/* Each named value of `f` (lstm/fields.h) on the table at the top. */
struct spk_fields;
void spk_lua_setfields(lua_State *L, const struct spk_fields *f);
/* Pushes the strings of the list at idx, sorted (strcmp), as a new list. */
void spk_lua_push_sorted(lua_State *L, int idx);
/* Pushes the names of the entries of the open folder d that `keep` takes,
 * sorted (strcmp), as a new list; closes d. */
void spk_lua_push_folder_names(lua_State *L, DIR *d, bool (*keep)(const char *name));

/* ---- values in messages -------------------------------------------------- */

/* What the value at idx is, as messages say it: "tensor", "closed tensor",
 * "generator" (spk objects by kind), "number", "string", "table", ..., the
 * __name of another library's object. */
const char *spk_lua_typename(lua_State *L, int idx);
/* luaL_typeerror with spk_lua_typename: "<expected> expected, got <type>". */
int spk_lua_typeerror(lua_State *L, int arg, const char *expected);
/* The block of the userdata at idx behind `metatable`, or that type error
 * naming it `name` (luaL_checkudata in spk's words). */
void *spk_lua_checkudata(lua_State *L, int idx, const char *metatable, const char *name);
/* Pushes a short description of the value at idx for messages, made
 * without running Lua code: number 2, string "hello", table, tensor. */
const char *spk_lua_describe(lua_State *L, int idx);

/* ---- options ---------------------------------------------------------------- */

/* Raises "<where>: unknown option '<key>' (known: a, b, c)" for the first key
 * of the table at idx that is not in the NULL-terminated `known` list (a key
 * that is no string is named by its type). Nothing for nil or a non-table. */
void spk_lua_checkkeys(lua_State *L, int idx, const char *const *known, const char *where);
/* NULL when the key at idx is one of `known` (NULL-terminated), else pushes
 * and returns the message every option check gives: "unknown option 'x'
 * (known: a, b)". */
const char *spk_lua_unknown_key(lua_State *L, int idx, const char *const *known);
/* The options table at `arg` (absent or nil is fine); raises an error naming
 * the argument and any key not in `known`. Returns true if a table is present. */
bool spk_lua_checkoptions(lua_State *L, int arg, const char *const *known);
/* The index in the NULL-terminated `names` of the string at idx, as
 * luaL_checkoption over the one list of a vocabulary; `def` (or -1: required)
 * for nil. Otherwise "<what> must be "a", "b" or "c", got <value>", raised
 * against argument idx when `what` is NULL ("bad argument #2 to 'f' (...)"). */
int spk_lua_checkoption(lua_State *L, int idx, int def, const char *const *names, const char *what);
/* "\"a\", \"b\" or \"c\"": a list's names as messages and docs print them. */
const char *spk_lua_push_choices(lua_State *L, const char *const *names);
/* Field `key` of the table at t as an integer in [lo, hi]; def when absent
 * (def < lo: required). Errors read "<where>.<key> must be ...". Makes no
 * allocation but for its errors. */
lua_Integer spk_lua_intfield(lua_State *L, int t, const char *key, lua_Integer def, lua_Integer lo, lua_Integer hi,
                             const char *where);
/* Field `key` of the table at t as a boolean (nil: false); anything else is
 * "<where>.<key> must be true or false, got ...". */
bool spk_lua_boolfield(lua_State *L, int t, const char *key, const char *where);
/* Field `key` of the table at t as a string without NUL bytes, NULL when
 * nil; the string is left on the stack (the caller pops it when done), so it
 * stays alive whatever happens to the table. */
const char *spk_lua_stringfield(lua_State *L, int t, const char *key, const char *where);
/* Field `key` of the table at t as a dim3: a positive integer or {x[, y[,
 * z]]}; nil: {fallback, 1, 1}, or all 0 for a fallback of 0. */
void spk_lua_dim3field(lua_State *L, int t, const char *key, unsigned out[3], unsigned fallback, const char *where);
/* Field `key` of the options table at `arg` (absent table: fallback). */
double spk_lua_optfield_number(lua_State *L, int arg, const char *key, double fallback);
spk_dtype spk_lua_optfield_dtype(lua_State *L, int arg, spk_dtype fallback);
/* The dtype named at `arg`, or `fallback` when the argument is absent or nil. */
spk_dtype spk_lua_optdtype(lua_State *L, int arg, spk_dtype fallback);
/* The integers of the list at argument `arg`, read raw into out (min to
 * max of them); otherwise a bad-argument error "<what> must list 1 .. 8
 * integers, got 9" or "<what>[2] must be an integer, got string "x"".
 * Returns how many. */
int spk_lua_checkintegers(lua_State *L, int arg, int64_t *out, int min, int max, const char *what);
/* Reads a shape starting at `arg`: either a table {2, 3} or consecutive
 * integer arguments. Stops at the first argument that is not an integer
 * (for varargs) and returns the index of the first argument after the shape.
 * `allow_infer` permits one -1 entry (view/reshape). */
int spk_lua_checkshape(lua_State *L, int arg, int *ndim, int64_t *shape, bool allow_infer);
/* The same with integer arguments up to `last` only (spk.full's shape before its value). */
int spk_lua_readshape(lua_State *L, int arg, int last, int *ndim, int64_t *shape, bool allow_infer);

/* A tensor's dims as Lua gives them (1-based, negative from the end), 0-based
 * here: a dim of t at `arg`; a reduction's optional dim (SPK_ALL_DIMS when
 * absent); an optional keepdim boolean. A Lua number as a core scalar
 * (integers exact). */
int spk_lua_checkdim(lua_State *L, int arg, const spk_tensor *t);
int spk_lua_optreducedim(lua_State *L, int arg, const spk_tensor *t);
bool spk_lua_optkeepdim(lua_State *L, int arg);
spk_scalar spk_lua_toscalar(lua_State *L, int idx);

/* ---- tensors ----------------------------------------------------------------- */

#define SPK_TENSOR_MT "spk.tensor"

/* The userdata behind a Lua tensor. `t` is NULL once closed or collected. */
typedef struct spk_lua_tensor {
    spk_tensor *t;
} spk_lua_tensor;

/* What tensor methods are called on (tensor.c's, and those other areas add). */
extern const spk_lua_self spk_lua_tensor_self;

/* The tensor at idx; a Lua error naming the argument if it is not one or is closed. */
spk_tensor *spk_lua_checktensor(lua_State *L, int idx);
/* The tensor at idx, or NULL if the value is not an (open) tensor. */
spk_tensor *spk_lua_totensor(lua_State *L, int idx);
/* Pushes a new Lua tensor owning t. If t is NULL, raises spk_last_error(). */
void spk_lua_pushtensor(lua_State *L, spk_tensor *t);
/* The tensor at idx (as spk_lua_checktensor), held for the rest of the
 * running C function: the pointer returned is a private view of it, pushed
 * as a to-be-closed value (one slot), whose storage stays alive if the
 * tensor is closed meanwhile, and which goes when the function returns or
 * raises. Push it after any stack shuffling (lua_remove, lua_insert). */
spk_tensor *spk_lua_holdtensor(lua_State *L, int idx);

/* The list of layers {W =, R =, B =} at idx (1 to `max` of them) into out,
 * the tensors' pointers read raw (the list keeps them alive; valid while
 * nothing allocates): "<where>: layers must hold 1..64 layers, got 0",
 * "layer 2 is not a table {W =, R =, B =} (got number)", "layer 1: R is not
 * a tensor (got string)" (where: the messages' prefix, NULL for none). A
 * part left out is NULL (the stack's validation names it). Returns how many. */
struct spk_lstm_layer;
int spk_lua_checklayers(lua_State *L, int idx, struct spk_lstm_layer *out, int max, const char *where);

/* A trace table {layer = k (from 1), direction = "forward" | "reverse",
 * steps = {t, ...} (from 1)} at idx, read raw; `steps` (room for
 * SPK_LSTM_TRACE_MAX_STEPS) receives the 0-based positions ("trace.steps
 * must list 1 to 1024 time positions, got 0"). Range checks are
 * spk_lstm_trace_check's. */
struct spk_lstm_trace;
void spk_lua_read_trace(lua_State *L, int idx, struct spk_lstm_trace *trace, int64_t *steps);
/* Pushes {h =, c =, layer =, direction =, steps =} (layer and steps from 1)
 * of a trace, taking h and c. */
void spk_lua_push_trace(lua_State *L, const struct spk_lstm_trace *trace, spk_tensor *h, spk_tensor *c);

/* ---- failures ------------------------------------------------------------------ */

/* Raises a Lua error with spk_last_error(). Never returns. */
int spk_lua_fail(lua_State *L);
/* Returns 0 when `status` is 0, else raises spk_last_error() (CHECK-style:
 * `spk_lua_check(L, spk_stream_synchronize(s));`). */
int spk_lua_check(lua_State *L, int status);

/* ---- documentation --------------------------------------------------------
 * The doc registry (one per Lua state, read by help() through
 * lua/spk/doc.lua, which Lua modules feed too) maps each function to its
 * text; the registrations above record theirs. */

/* Records `doc` for the value at idx (a function or a table). */
void spk_lua_setdoc(lua_State *L, int idx, const char *doc);
/* Records a userdata type: the methods table at idx serves values whose
 * metatable is named type_name (their __index may be a function, which help
 * and completion never call), with the type's doc. */
void spk_lua_settype(lua_State *L, const char *type_name, int methods_idx, const char *doc);
/* Pushes the registry's two tables: values -> doc (weak keys), and
 * type name -> {methods =, doc =}. */
void spk_lua_push_doc_registry(lua_State *L);

#endif
