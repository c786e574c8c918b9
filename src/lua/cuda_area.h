/* The cuda area's binding files: cuda.c (devices, streams, events, graphs,
 * the tensors' :cuda and :cpu), kernels.c (compile, modules, kernels, typed
 * scalars, the kernel cache) and blas.c (spk.blas). The stream and module
 * types are shared with the areas whose calls take them (cudnn.c, plan.c). */
#ifndef SPK_LUA_CUDA_AREA_H
#define SPK_LUA_CUDA_AREA_H

#include "cuda/runtime.h"
#include "lua/bind.h"

extern spk_lua_type spk_lua_stream_type; /* "spk.cuda.stream" */
extern spk_lua_type spk_lua_module_type; /* "spk.cuda.module": spk.cuda.compile's */

/* The open stream at idx, or NULL (the default stream) for nil. */
spk_stream *spk_lua_optstream(lua_State *L, int idx);
/* The same for field `key` of the table at t ("<where>: <key> must be an
 * open spk.cuda stream, got ..."; where NULL: no prefix). */
spk_stream *spk_lua_fieldstream(lua_State *L, int t, const char *key, const char *where);

/* spk_cuda_get_info into *info, and a new table (room for `fields` keys)
 * holding the versions it reports: runtime_version, driver_version and
 * nvrtc_version ("13.0"), as spk.cuda.info and spk.core.system_environment
 * give them. */
void spk_lua_push_cuda_versions(lua_State *L, spk_cuda_info *info, int fields);

/* kernels.c's functions into the table `cuda` (core.cuda, an absolute index). */
void spk_open_cuda_kernels(lua_State *L, int cuda);

#endif
