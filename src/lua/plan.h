/* The one plan userdata of the GPU LSTM stack (lstm/stack_plan.h), shared by
 * its two constructors: core.plan_new (a built-in kernel family, plan.c) and
 * core.kernel_stack_new (a kernel of one's own, kernel_stack.c). */
#ifndef SPK_LUA_PLAN_H
#define SPK_LUA_PLAN_H

#include "lstm/stack_plan.h"
#include "lua/bind.h"

extern spk_lua_type spk_lua_plan_type; /* "spk.lstm.plan" */

/* What every plan constructor reads first, in this order, from the table at
 * argument 1: layers, a list of {W =, R =, B =} (the list stays on the Lua
 * stack, so its tensors stay referenced for the call), batch and steps
 * ("stack.batch must be an integer, ..."), math (SPK_MATH_STACKS; nil:
 * fp32). Read raw; the layers' pointers stay valid while nothing allocates,
 * so the plan's object is pushed before this is called. `layers` has room
 * for SPK_LUA_PLAN_MAX_LAYERS. */
#define SPK_LUA_PLAN_MAX_LAYERS 64
int spk_lua_read_stack(lua_State *L, spk_lstm_layer *layers, int64_t *batch, int64_t *steps, spk_math_mode *math);

/* kernel_stack.c's functions (a kernel of one's own) into the table at `module`. */
void spk_open_kernel_stack(lua_State *L, int module);

#endif
