/* Where spk's own files are at run time: its Lua files, the kernels NVRTC
 * compiles, the experiments and the tools. One rule finds every kind:
 *
 *   1. the kind's environment variable (SPK_LUA_DIR, SPK_KERNEL_DIR,
 *      SPK_EXPERIMENT_DIR, SPK_TOOL_DIR), when set, as it is;
 *   2. else the first of these roots that exists decides, and the kind's
 *      folder must be below it:
 *      - an installed spk: the prefix above the file holding this code, the
 *        program <prefix>/bin/spk or the module <prefix>/lib/lua/5.4/spk.so
 *        (lib/<multiarch>/lua/5.4 too), recognised by
 *        <prefix>/share/lua/5.4/spk/init.lua; kinds below it in make
 *        install's layout (share/spk/<kind>) or a LuaRocks tree's
 *        (share/lua/5.4/spk/<kind>);
 *      - a build: the source tree around the build folder (<tree>/build/spk,
 *        <tree>/build/tests/test_x), recognised by <tree>/lua/spk/init.lua;
 *      - the source tree the build was compiled from (SPK_SOURCE_DIR; make
 *        install's copies are built without it).
 *
 * An installed spk therefore never reads the source tree, and a build reads
 * its own tree wherever the tree has been copied. Plain C, no Lua. */
#ifndef SPK_PATHS_H
#define SPK_PATHS_H

#include <stddef.h>

/* The folder of `kind` ("lua", "kernels", "experiments", "tools"), copied
 * into out. 0, or -1 with a message naming what was looked at. */
int spk_find_dir(const char *kind, char *out, size_t size);

/* The i-th kind (0-based) and its environment variable; NULL past the end. */
const char *spk_dir_kind(int i);
const char *spk_dir_env(const char *kind);

/* A path "<kind>/<rest>" (experiments/quickstart.lua, tools/bench_plot.lua)
 * as a file inside that kind's folder: 0 and the path in out when the file
 * exists there, else -1 (no message: the caller reports its own path). */
int spk_find_file(const char *relative, char *out, size_t size);

#endif
