-- spk as a LuaRocks package, built from this tree with its Makefile:
--   luarocks --lua-version 5.4 make [--tree DIR] spk-dev-1.rockspec
-- installs lib/lua/5.4/spk.so, share/lua/5.4/spk/ (with the kernels,
-- experiments and tools in share/lua/5.4/spk/kernels, experiments, tools,
-- where spk looks in a LuaRocks tree) and bin/spk. Needs the CUDA toolkit
-- of `make setup` (CUDA_HOME, default /usr/local/cuda). LuaRocks warns that
-- CFLAGS is not passed: the Makefile keeps its own flags (OPT sets -O), since
-- a CFLAGS on make's command line would replace them all.
rockspec_format = "3.0"
package = "spk"
version = "dev-1"
source = {
  url = "git+file://.",
}
description = {
  summary = "Lua-scriptable research toolkit for persistent LSTM recurrence kernels on NVIDIA GPUs",
  detailed = [[
A C runtime exposes tensors, files, weight packing, tile schedules,
NVRTC-compiled kernels and their launches as Lua 5.4 bindings, with two
built-in LSTM recurrence kernels checked against an f64 reference and cuDNN.
]],
}
dependencies = {
  "lua >= 5.4, < 5.5",
}
build = {
  type = "make",
  build_target = "install-build",
  build_variables = {
    LUA_INC = "$(LUA_INCDIR)",
  },
  install_target = "install",
  install_variables = {
    LUA_INC = "$(LUA_INCDIR)",
    PREFIX = "$(PREFIX)",
    BINDIR = "$(BINDIR)",
    LIBDIR = "$(LIBDIR)",
    LUADIR = "$(LUADIR)",
    DATADIR = "$(LUADIR)/spk",
    DOCDIR = "$(PREFIX)/doc",
  },
}
