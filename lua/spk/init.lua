-- The spk module as scripts see it: the C bindings (spk.core) plus what is
-- better written in Lua. Each area file lua/spk/<area>.lua returns a function
-- install(spk, core) that adds that area's API to the module table.
local core = require "spk.core"

-- The plan constructors and variant helpers of the GPU backends (plan_new,
-- kernel_*, the families' persistent_* and cluster_* helpers) are reached
-- through spk.lstm (stack{backend = ...}, kernel_variant, kernel_options,
-- kernel_stack, ...), the step timeline's bindings (timeline_*) through
-- spk.timeline; they stay in spk.core only, as do the facts behind
-- spk.version and spk.provenance (system_*).
local function internal(name)
  return name:match("^persistent_") or name:match("^cluster_") or name:match("^timeline_")
    or name:match("^kernel_") or name == "plan_new" or name == "trace_check" or name:match("^system_")
end

local spk = { core = core }
for name, value in pairs(core) do
  if not internal(name) then
    spk[name] = value
  end
end

for _, area in ipairs { "tensor", "cuda", "lstm", "stack", "cpu", "families", "kernel_stack", "cudnn", "debug",
                        "auto", "timeline", "help" } do
  require("spk." .. area)(spk, core)
end

-- Every backend registers what a tuning record may choose for it; one doc
-- covers them all, whichever backends exist.
if type(spk.lstm.tunables) == "table" then
  local doc = require "spk.doc"
  for name, check in pairs(spk.lstm.tunables) do
    doc(check, ("spk.lstm.tunables.%s(options[, shape]) -> true | nil, message\n"
      .. "Whether a tuning record's options for backend %q are ones it takes (spk.tuning checks records with\n"
      .. "it before backend \"auto\" uses them)."):format(name, name))
  end
end

-- What this build is (lua/spk/provenance.lua: every results file records it too).
spk.version = require("spk.provenance").version()
require("spk.doc")(spk.version, [[
spk.version -> {version = "0.1.0", commit = "<git hash>", dirty = true | false | nil}
This build: spk's version, the git commit it was built from ("unknown" when built outside git), and
whether tracked files differed from that commit at build time (nil: unknown). tostring gives
"0.1.0 (d385bdb, clean)". Results files carry it in their provenance record (require "spk.provenance").]])
-- The bound a stack's output is held to against the f64 reference (one rule,
-- lua/spk/bound.lua: spk bench and the test helpers take it from there).
spk.lstm.bound = require("spk.options").takes(1, "spk.lstm.bound", require("spk.bound").bound)
require "spk.doc"(spk.lstm.bound, [[
spk.lstm.bound{backend = "kernel", math = "fp32", against = {rel_l2 =, max_abs =} | layers =, x =} -> bounds
The bound spk bench holds a row to against the f64 reference: cuDNN's FP32 algorithms rel_l2 <= 1e-4
(TF32 1e-2), the cpu backend 1e-4, every GPU kernel (the built-in ones and one's own) 1.1x the rel_l2
and 2x the max_abs of cuDNN standard's error on the same input in the math it is held to (3xtf32: FP32).
against: that error (spk.compare(y_cudnn, ref)); layers and x measure it (a GPU). bounds = {rel_l2,
max_abs} as spk.check_near and assert.within_reference take it, with .rule and .against; prints as one
line.]])

-- The interactive session's settings (its machinery is the module spk.repl).
spk.repl = { precision = require("spk.repl").precision }
do
  local doc = require "spk.doc"
  doc(spk.repl, [[
spk.repl: the interactive session's settings. spk.repl.precision(digits) sets how many significant
digits floats print with (0: the shortest exact form).]])
end

-- Errors about a script's arguments point at the script's line (spk.errors).
require("spk.errors").install(spk)

return spk
