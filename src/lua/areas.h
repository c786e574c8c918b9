/* The areas of the C module spk.core (module.c opens them in turn, and so
 * no area file calls another's opener): each registers its functions into
 * the module table at `module` (an absolute stack index) through lua/bind.h.
 * The cuda area's kernels.c is opened by spk_open_cuda_kernels
 * (lua/cuda_area.h). */
#ifndef SPK_LUA_AREAS_H
#define SPK_LUA_AREAS_H

#include "lua/bind.h"

void spk_open_tensor(lua_State *L, int module); /* and random.c, files.c, compare.c: lua/tensor_area.h */
void spk_open_cuda(lua_State *L, int module);
void spk_open_launch_limits(lua_State *L, int module); /* spk.cuda's launch limits */
void spk_open_blas(lua_State *L, int module);
void spk_open_lstm(lua_State *L, int module);
void spk_open_plan(lua_State *L, int module);
void spk_open_cudnn(lua_State *L, int module);
void spk_open_timeline(lua_State *L, int module);
void spk_open_system(lua_State *L, int module); /* spk.core.system: the build, the machine, terminals */

#endif
