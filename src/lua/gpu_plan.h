/* What the bindings of the GPU stack plans share (persistent.c:
 * core.persistent_stack_new, cluster.c: core.cluster_stack_new, kernel_stack.c:
 * core.kernel_stack_new): the option readers, the trace tables, the info
 * fields of every plan, and the plan userdata with its time, close and
 * __tostring. */
#ifndef SPK_LUA_GPU_PLAN_H
#define SPK_LUA_GPU_PLAN_H

#include "cuda/timeline.h"
#include "lstm/device_layers.h"
#include "lstm/kernel_options.h"
#include "lstm/kernel_stack.h"
#include "lstm/lstm.h"
#include "lua/bind.h"

/* t.name as an integer, def when nil; otherwise a Lua error
 * "<where>.<name> must be an integer, got <type>". */
lua_Integer spk_lua_int_field(lua_State *L, int t, const char *name, lua_Integer def, const char *where);
/* t.math: "fp32" (left out) or "tf32", the input projections' math. */
spk_math_mode spk_lua_read_math(lua_State *L, int t);
/* The options every stack constructor reads first, in this order, from the
 * table at argument 1 (which must be a table): layers, a list of
 * {W =, R =, B =} (the list stays on the Lua stack, so its tensors stay
 * referenced for the call), batch and steps ("stack.batch must be an
 * integer, ..."). Read raw; the layers' pointers stay valid while nothing
 * allocates, so the plan's slot is pushed before this is called. */
const spk_lstm_layer *spk_lua_read_stack_shape(lua_State *L, int *count, int64_t *batch, int64_t *steps);

/* Reads a kernel table (argument idx; nil: no option given) into `choice`
 * through the family's option table, with raw access; a key the family does
 * not know or a value an option does not take is a Lua error naming it. */
void spk_lua_read_kernel_choice(lua_State *L, int idx, const spk_kernel_family *f, spk_kernel_choice *choice);
/* Sets each option of `variant` on the table at the top (a word option as
 * its word) and t.defines = {MACRO = "value", ...}. */
void spk_lua_set_kernel_options(lua_State *L, const spk_kernel_family *f, const void *variant);
/* Pushes a family's option table as data: {backend =, options = {{name =,
 * macro =, words = {...} | values = {...} | min =, max =, default =
 * "layers" | "batch" | "fit", help =}, ...}, rules = {message, ...},
 * text = what spk help prints}. */
void spk_lua_push_kernel_family(lua_State *L, const spk_kernel_family *f);
/* Sets layers, hidden, input, batch, steps and math on the table at the top. */
void spk_lua_set_gpu_shape(lua_State *L, const spk_lstm_gpu_shape *shape);

/* A trace table {layer = k (from 1), direction = "forward" | "reverse",
 * steps = {t, ...} (from 1)} as spk.lstm.reference takes it, at idx, read
 * raw; `steps` (room for SPK_LSTM_TRACE_MAX_STEPS) receives the 0-based
 * positions. Range checks are spk_lstm_trace_check's. */
void spk_lua_read_trace(lua_State *L, int idx, spk_lstm_trace *trace, int64_t *steps);
/* Pushes y and {trace = {h =, c =, layer =, direction =, steps =}} (steps
 * from 1) of a traced forward, taking y, h and c. */
void spk_lua_push_traced(lua_State *L, spk_tensor *y, const spk_lstm_trace *trace, spk_tensor *h, spk_tensor *c);

/* A plan type as its binding describes it to the shared userdata. */
typedef struct spk_lua_gpu_plan_type {
    const char *metatable;
    const char *closed_name; /* __tostring of a closed plan */
    void (*free)(void *plan);
    int (*time)(void *plan, const spk_tensor *x, int rounds, int warmup, double *ms);
    /* the timeline build recording a selection (plan:time's fifth argument) */
    int (*time_timeline)(void *plan, const spk_tensor *x, const spk_timeline_selection *sel, int rounds, int warmup,
                         double *ms);
    void (*push_name)(lua_State *L, const void *plan); /* pushes __tostring of an open plan */
} spk_lua_gpu_plan_type;

/* Registers the type's metatable (__gc and __close: an idempotent release,
 * __tostring) with the methods forward and info (the binding's) and time and
 * close. `type` must outlive the Lua state (a static). */
void spk_lua_gpu_plan_register(lua_State *L, const spk_lua_gpu_plan_type *type, lua_CFunction forward,
                               lua_CFunction info);
/* Pushes a new userdata of the type holding no plan yet; the caller stores
 * the plan in the returned slot (a failed constructor leaves it NULL). */
void **spk_lua_gpu_plan_push(lua_State *L, const spk_lua_gpu_plan_type *type);
/* The plan of the userdata at argument 1; "lstm stack: the plan is closed"
 * once closed. */
void *spk_lua_gpu_plan_check(lua_State *L, const spk_lua_gpu_plan_type *type);

#endif
