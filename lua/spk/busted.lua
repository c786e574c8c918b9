-- spk.busted: what makes a regression suite of one's own kernel variants
-- short: specs that say a variant still matches the reference within its
-- bound, is still bitwise deterministic, and has not slowed down. `spk test`
-- (lua/spk/cli/test.lua) loads it before any spec; under plain busted a spec
-- (or a .busted helper) says require "spk.busted". docs/testing.md walks
-- through a suite and its failures.
--
-- Specs that need a device
--   gpu_it(name, fn)     runs where a CUDA device is present; elsewhere the
--                        spec is reported as skipped, "<name> [GPU: no CUDA
--                        device]", never as passed
--   nogpu_it(name, fn)   the opposite (specs of the no-device errors)
--   spk.busted.has_gpu() whether a CUDA device is present
--   spk.busted.skip(message)  inside a running spec: ends it as skipped with
--                        the message (what a spec that cannot run here says)
--
-- Assertions (each also negated: assert.is_not.<name>)
--   assert.tensor_near(actual, expected, {rel_l2 =, max_abs =})
--       actual within the bounds of the truth `expected` (actual first, as
--       spk.compare and every comparison of spk; also
--       assert.tensor_near{actual =, expected =, rel_l2 =}); the message is
--       spk.check_near's report (measured values, bounds, the worst index and
--       both values there).
--   assert.bits_equal(a, b[, what])
--       spk.bits_equal: the same values bit for bit in the sense of
--       spk.compare (0 ulp everywhere, +0 and -0 equal, NaN and Inf at the
--       same places, same shape and dtype). The message names the first
--       differing element in row-major order (its 1-based index and flat
--       position) and both values with their bits; `what` heads it ("tile
--       height 4").
--   assert.within_reference(plan_or_y, layers, x[, {rel_l2 =, max_abs =}])
--       plan:forward(x) (or the given output y) within the bounds of the f64
--       reference spk.lstm.reference(layers, x, {precision = "f64"}),
--       computed once per content of (layers, x) in a process (keyed on
--       spk.digest of x and of every W, R, B: a tensor changed in place gets
--       a new reference); check_near's message.
--       Without bounds, the bound spk bench holds the plan to
--       (spk.lstm.bound{layers =, x =, math = plan.math}: cuDNN standard's
--       error on x, measured; a GPU).
--   assert.no_slower(plan, {against =, tolerance = 0.03, rounds = 7,
--                           replays = 5, warmup = 1, x =, yardstick =, dir =})
--       plan is not slower than a baseline, judged on ratios of times taken
--       in this process, never on absolute times (see "Speed" below).
--
-- Speed
--   against = another plan: the two plans are timed in turn, `rounds` times,
--     in the order A B, B A, A B, ... (so a drift of the machine's speed
--     weighs on both alike); each time is the median of `replays` timed
--     replays after `warmup` discarded ones (plan:time, the machinery of
--     spk bench), and one untimed :time call of each comes first (compiling,
--     capturing). Each round gives one ratio plan / baseline. Over the rounds:
--     the median ratio, and spread = (high - low) / median, where low .. high
--     is the interval that holds the median ratio with at least 95%
--     confidence whatever the noise's distribution: the k-th smallest to the
--     k-th largest ratio (spk.busted.median_interval_rank: k = 1, the whole
--     range as in spk.bench's spread, up to 8 rounds; then it narrows, 4 of 15,
--     6 of 20, so more rounds buy sensitivity on a noisy machine).
--     slowdown = median - 1. The assertion fails only when slowdown >
--     tolerance + spread: a slowdown the noise of this run could explain
--     passes.
--   against = "name": the stored baseline <dir>/<name>.json, "the last
--     accepted". A stored time would be an absolute one, so a baseline stores
--     a ratio instead: the plan against a yardstick timed beside it (opts.yardstick,
--     any plan; by default, for a GPU plan, cuDNN's standard algorithm at the
--     plan's layers, shape and math, which no spk kernel change moves). Now
--     the same ratio is measured again; slowdown = now / then - 1, and the
--     assertion fails when slowdown > tolerance + the spread now + the
--     spread then. The file keeps one baseline per device, keyed by the
--     device's facts (name, compute capability, SMs, driver, CUDA runtime,
--     cuDNN; on the cpu backend the CPU's model and core count); a baseline
--     also records its plan's kernel hash (spk.busted.kernel_hash: the
--     variant, its compile-time defines and the kernel sources), which the
--     messages show, so "kernel changed since the baseline" or "kernel
--     unchanged" is said. Where the file has no baseline for this device
--     (the first run), or under `spk test --update-baseline`
--     ($SPK_UPDATE_BASELINE=1), the ratio is recorded, written to the file
--     and the spec ends as skipped with what was recorded. dir: opts.dir,
--     else `spk test --baselines DIR` ($SPK_BASELINE_DIR), else baselines/
--     beside the spec file.
--   against = a baseline itself (one entry of such a file, or the whole file
--     read with spk.busted.load_baselines): compared as above; an entry made
--     on another device, or for another shape or yardstick, is refused with
--     an error naming both, never compared.
--   spk.busted.compare_speed(plan, opts) -> result: the measurement and the
--     verdict without asserting ({slower, slowdown, allowed, ratio = {median,
--     min, max, spread, samples}, message, ...}; result.recorded is the path
--     written when a baseline was recorded).
--
-- The summary line
--   spk.busted.counter(busted) -> counts: counts {passed, failed, skipped} of
--     a busted run as its TAP output shows them (a test's end: success,
--     pending = skipped, failure or error; an error outside any test, a
--     describe block or a file that does not load, is one failure).
--   spk.busted.summary_line(counts) -> "N passed, N failed[, N skipped]",
--     the last line of scripts/test.sh and of spk test.
local M = {}

local spk = require "spk"
local luassert = require "luassert"
local say = require "say"

-- What `spk test` sets for the run (nil: the environment decides).
M.config = { update_baseline = nil, baseline_dir = nil, report = nil }

M.BASELINE_FORMAT = 1

-- The first stack frame outside this file, luassert and busted: the spec
-- (or script) that called, where errors about its arguments point and
-- baselines/ lives beside.
local library_dirs

-- "@<folder>/" of busted's and luassert's own files.
local function libraries()
  if not library_dirs then
    library_dirs = {}
    for _, module in ipairs { "busted.core", "luassert.assert" } do
      local path = package.searchpath(module, package.path)
      local dir = path and path:match("^(.*/)[^/]*$")
      if dir then library_dirs[#library_dirs + 1] = "@" .. dir end
    end
  end
  return library_dirs
end

local function caller_info()
  local self = debug.getinfo(1, "S").source
  for level = 2, 64 do
    local info = debug.getinfo(level, "Sl")
    if not info then break end
    local src = info.source
    local library = false
    for _, dir in ipairs(libraries()) do
      if src:sub(1, #dir) == dir then library = true end
    end
    if src ~= self and src:sub(1, 1) == "@" and not library then return info end
  end
  return nil
end

-- "file:line: " of that caller.
local function at()
  local info = caller_info()
  return info and ("%s:%d: "):format(info.short_src, info.currentline) or ""
end

-- Raises `message` at the caller's line.
local function raise(message)
  error(at() .. message, 0)
end

-- ------------------------------------------------------------------ busted

-- busted's spec API (it, pending, ...), which exists once busted runs.
local function api()
  return require "busted"
end

-- busted's core, reached through the upvalue every registered block
-- function carries: the one place a running spec can be ended as pending.
local function busted_core()
  local it = api().it
  if type(it) ~= "function" then return nil end
  for i = 1, 64 do
    local name, value = debug.getupvalue(it, i)
    if name == nil then break end
    if name == "busted" and type(value) == "table" and type(value.pending) == "function" then return value end
  end
  return nil
end

function M.skip(message)
  local core = busted_core()
  if not core then error("spk.busted.skip: not inside a running busted spec (" .. tostring(message) .. ")", 2) end
  return core.pending(message)
end

function M.has_gpu()
  return spk.cuda ~= nil and spk.cuda.available ~= nil and spk.cuda.available()
end

-- Tail calls, so that busted takes the spec file's line (not this file's)
-- as where the spec was declared.
function M.gpu_it(name, fn)
  if M.has_gpu() then return api().it(name, fn) end
  return api().pending(name .. " [GPU: no CUDA device]")
end

function M.nogpu_it(name, fn)
  if M.has_gpu() then return api().pending(name .. " [needs a machine without a CUDA device]") end
  return api().it(name, fn)
end

_G.gpu_it = M.gpu_it
_G.nogpu_it = M.nogpu_it

-- busted's pending(name) element keeps, in its attributes, the default
-- function pending registers with, and busted's json output handler encodes
-- the element whole: it cannot write a function, so a run with a skipped
-- spec printed no JSON and one failure more. Each pending element, once
-- registered, gets attributes without functions (busted reads the default
-- only when registering, before it attaches the element), so skipped specs
-- are valid in every output format.
local function plain_copy(t, seen)
  seen = seen or {}
  if seen[t] then return seen[t] end
  local copy = {}
  seen[t] = copy
  for k, v in pairs(t) do
    if type(v) == "table" then copy[k] = plain_copy(v, seen)
    elseif type(v) ~= "function" and type(v) ~= "userdata" and type(v) ~= "thread" then copy[k] = v end
  end
  return copy
end

function M.plain_pendings(core)
  if not core or core.spk_plain_pendings then return end
  core.spk_plain_pendings = true
  local attach = core.context.attach -- how busted's register handler adds an element
  core.context.attach = function(child)
    if type(child) == "table" and child.descriptor == "pending" and type(child.attributes) == "table" then
      child.attributes = plain_copy(child.attributes)
    end
    return attach(child)
  end
end

M.plain_pendings(busted_core()) -- required from a spec: busted runs already (spk test calls it itself)

-- ------------------------------------------------------------------ the summary

function M.counter(busted)
  local counts = { passed = 0, failed = 0, skipped = 0 }
  busted.subscribe({ "test", "end" }, function(_, _, status)
    if status == "success" then
      counts.passed = counts.passed + 1
    elseif status == "pending" then
      counts.skipped = counts.skipped + 1
    else
      counts.failed = counts.failed + 1
    end
    return nil, true
  end)
  busted.subscribe({ "error" }, function(element)
    if element.descriptor ~= "it" then counts.failed = counts.failed + 1 end
    return nil, true
  end)
  return counts
end

function M.summary_line(counts)
  if (counts.skipped or 0) > 0 then
    return ("%d passed, %d failed, %d skipped"):format(counts.passed, counts.failed, counts.skipped)
  end
  return ("%d passed, %d failed"):format(counts.passed, counts.failed)
end

-- ------------------------------------------------------------------ registering

-- An assertion whose message is the report its check returns: check(args) ->
-- ok, report[, skip]. The report replaces the raw arguments in the message; a
-- skip message ends the spec as skipped instead (a tail call: busted takes
-- the spec's line as where it ended).
local function register(name, positive, negative, check)
  local function assertion(_, arguments)
    local ok, report, skip = check(arguments)
    if skip then return M.skip(skip) end
    arguments[1], arguments.n, arguments.nofmt = report, 1, { true }
    return ok
  end
  say:set("assertion." .. name .. ".positive", positive .. ":\n%s")
  say:set("assertion." .. name .. ".negative", negative .. ":\n%s")
  luassert:register("assertion", name, assertion, "assertion." .. name .. ".positive",
    "assertion." .. name .. ".negative")
end

-- ------------------------------------------------------------------ tensor_near

register("tensor_near", "Expected tensors to be near", "Expected tensors not to be near", function(arguments)
  local ok, report = spk.check_near(arguments[1], arguments[2], arguments[3])
  return ok, report
end)

-- ------------------------------------------------------------------ bits_equal

local function host(t)
  if t.device ~= nil and t.device ~= "cpu" then return t:cpu() end
  return t
end

-- ok, report for bits_equal (spk.bits_equal's).
function M.check_bits(a, b, what)
  local ok, report = spk.bits_equal(a, b, what)
  return ok, report
end

register("bits_equal", "Expected tensors to be equal bit for bit", "Expected tensors to differ in bits",
  function(arguments)
    return M.check_bits(arguments[1], arguments[2], arguments[3])
  end)

-- ------------------------------------------------------------------ within_reference

-- f64 references keyed on the content of (layers, x): the digests of x and
-- of every layer's W, R and B (spk.digest), never the objects, so a tensor
-- changed in place (x:fill(0.5)) gets a new reference. The last few are kept.
local REFERENCES_KEPT = 4
local references, reference_order = {}, {}

local function content_key(layers, x)
  local parts = { spk.digest(host(x)) }
  for k, layer in ipairs(layers) do
    for _, part in ipairs { "W", "R", "B" } do
      local t = layer[part]
      parts[#parts + 1] = spk.is_tensor(t) and spk.digest(host(t)) or ("layer %d %s: %s"):format(k, part, type(t))
    end
  end
  return table.concat(parts, " ")
end

function M.reference(layers, x)
  local key = content_key(layers, x)
  local y = references[key]
  if not y then
    y = spk.lstm.reference(layers, x, { precision = "f64" })
    references[key] = y
    reference_order[#reference_order + 1] = key
    if #reference_order > REFERENCES_KEPT then references[table.remove(reference_order, 1)] = nil end
  end
  return y
end

local function field(object, key)
  local ok, value = pcall(function() return object[key] end)
  if ok then return value end
  return nil
end

local function is_plan(object, method)
  local t = type(object)
  return (t == "table" or t == "userdata") and type(field(object, method)) == "function"
end

-- A plan in words: its variant, else its backend and algorithm, else tostring.
function M.describe(plan)
  local variant = field(plan, "variant")
  local backend = field(plan, "backend")
  local algo = field(plan, "algo")
  if type(variant) == "string" then
    if type(backend) == "string" and not variant:find(backend, 1, true) then return backend .. " " .. variant end
    return variant
  end
  if type(algo) == "string" then return "cudnn " .. algo end
  return tostring(plan)
end

function M.check_reference(plan_or_y, layers, x, bounds)
  if bounds ~= nil and (type(bounds) ~= "table" or (bounds.rel_l2 == nil and bounds.max_abs == nil)) then
    raise("within_reference: give the bounds, {rel_l2 =, max_abs =} (one or both), or none for spk.lstm.bound's")
  end
  if type(layers) ~= "table" then
    raise(("within_reference: layers must be the stack's list of {W =, R =, B =}, got %s"):format(type(layers)))
  end
  if not spk.is_tensor(x) then
    raise(("within_reference: x must be the input tensor, got %s"):format(type(x)))
  end
  local y, what = plan_or_y, "the output"
  if not spk.is_tensor(y) then
    if not is_plan(y, "forward") then
      return false, ("expected a plan (with :forward) or an output tensor, got %s"):format(type(y))
    end
    what = M.describe(y)
    y = y:forward(x)
  end
  local about = ""
  if bounds == nil then -- the bound spk bench holds the plan to (for a kernel: cuDNN standard's error on x)
    local plan = not spk.is_tensor(plan_or_y) and plan_or_y or nil
    local plan_math, backend = plan and field(plan, "math"), plan and field(plan, "backend")
    if plan and backend == nil and type(field(plan, "algo")) == "string" then backend = "cudnn" end
    local fixed = backend == "cpu" or backend == "cudnn"
    bounds = spk.lstm.bound { backend = fixed and backend or nil, layers = not fixed and layers or nil,
                              x = not fixed and x or nil, math = type(plan_math) == "string" and plan_math or nil }
    about = (" (spk.lstm.bound: %s)"):format(bounds.rule)
  end
  local ok, report = spk.check_near(host(y), M.reference(layers, x), bounds)
  return ok, ("%s against the f64 reference: %s%s"):format(what, report, about)
end

register("within_reference", "Expected the output within its bounds of the f64 reference",
  "Expected the output beyond its bounds of the f64 reference", function(arguments)
    return M.check_reference(arguments[1], arguments[2], arguments[3], arguments[4])
  end)

-- ------------------------------------------------------------------ speed: identity

local function sha256(text)
  return spk.cuda.sha256(text)
end

local function backend_of(plan)
  local backend = field(plan, "backend")
  if type(backend) == "string" then return backend end
  if type(field(plan, "algo")) == "string" then return "cudnn" end
  return "unknown"
end

local function spk_version()
  local ok, program = pcall(require, "spk.program")
  return ok and type(program) == "table" and program.version or "unknown"
end

local cpu_facts_cache

local function cpu_facts()
  if cpu_facts_cache then return cpu_facts_cache end
  local model, cores = "unknown CPU", 0
  local f = io.open("/proc/cpuinfo", "r")
  if f then
    for line in f:lines() do
      local m = line:match("^model name%s*:%s*(.-)%s*$")
      if m and model == "unknown CPU" then model = m end
      if line:match("^processor%s*:") then cores = cores + 1 end
    end
    f:close()
  end
  cpu_facts_cache = { device = "cpu: " .. model, cores = cores }
  return cpu_facts_cache
end

local DEVICE_FIELDS = { "device", "cc", "sms", "driver", "runtime", "cudnn", "cores" }

-- The facts a time depends on: the GPU's and its drivers' (tuning.facts), or the CPU's for the cpu backend.
function M.device_facts(plan)
  if backend_of(plan) == "cpu" then return cpu_facts() end
  local f, why = require("spk.tuning").facts()
  if not f then raise("no_slower: a GPU plan needs a CUDA device (" .. tostring(why) .. ")") end
  return { device = f.device, cc = f.cc, sms = f.sms, driver = f.driver, runtime = f.runtime, cudnn = f.cudnn }
end

local function device_text(facts)
  local parts = { tostring(facts.device) }
  if facts.cc then parts[#parts + 1] = "compute capability " .. tostring(facts.cc) end
  if facts.sms then parts[#parts + 1] = tostring(facts.sms) .. " SMs" end
  if facts.driver then parts[#parts + 1] = "driver " .. tostring(facts.driver) end
  if facts.runtime then parts[#parts + 1] = "runtime " .. tostring(facts.runtime) end
  if facts.cudnn then parts[#parts + 1] = "cuDNN " .. tostring(facts.cudnn) end
  if facts.cores then parts[#parts + 1] = tostring(facts.cores) .. " cores" end
  return table.concat(parts, ", ")
end

function M.device_key(facts)
  local lines = { "spk baseline device " .. M.BASELINE_FORMAT }
  for _, name in ipairs(DEVICE_FIELDS) do
    if facts[name] ~= nil then lines[#lines + 1] = ("%s=%s"):format(name, tostring(facts[name])) end
  end
  return sha256(table.concat(lines, "\n") .. "\n")
end

-- What the plan runs, hashed: plan.kernel_hash where a plan carries its own,
-- else its backend, variant, math, the compiled variant's defines and (GPU
-- backends) every kernel source, or (cpu) the spk version.
function M.kernel_hash(plan)
  local own = field(plan, "kernel_hash")
  if type(own) == "string" then return own end
  local backend = backend_of(plan)
  local lines = { "spk kernel hash 1", "backend=" .. backend, "variant=" .. M.describe(plan),
                  "math=" .. tostring(field(plan, "math") or spk.lstm.math_default) }
  local kernel = field(plan, "kernel")
  local defines = type(kernel) == "table" and kernel.defines or nil
  if type(defines) == "table" then
    local names = {}
    for name in pairs(defines) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do lines[#lines + 1] = ("define %s=%s"):format(name, tostring(defines[name])) end
  end
  if backend == "cpu" then
    lines[#lines + 1] = "spk=" .. spk_version()
  else
    local hashes = require("spk.tuning").kernel_hashes()
    local names = {}
    for name in pairs(hashes) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do lines[#lines + 1] = ("kernel %s=%s"):format(name, hashes[name]) end
  end
  return sha256(table.concat(lines, "\n") .. "\n")
end

local SHAPE_FIELDS = { "batch", "steps", "input", "hidden", "layers" }

local function shape_of(plan)
  local layers = field(plan, "layers")
  return { batch = field(plan, "batch"), steps = field(plan, "steps"), input = field(plan, "input"),
           hidden = field(plan, "hidden"), layers = type(layers) == "table" and #layers or layers }
end

local function shape_words(s)
  return ("batch %s, %s steps, input %s, hidden %s, %s layers"):format(tostring(s.batch), tostring(s.steps),
    tostring(s.input), tostring(s.hidden), tostring(s.layers))
end

local function same_shape(a, b)
  for _, k in ipairs(SHAPE_FIELDS) do
    if tostring(a[k]) ~= tostring(b[k]) then return false end
  end
  return true
end

-- ------------------------------------------------------------------ speed: measuring

local function fail_option(message) raise("no_slower: " .. message) end

local function check_count(value, name, default, least)
  if value == nil then return default end
  if math.type(value) ~= "integer" or value < least then
    fail_option(("%s must be an integer >= %d, got %s"):format(name, least, tostring(value)))
  end
  return value
end

local known_options = { against = true, tolerance = true, rounds = true, replays = true, warmup = true, x = true,
                        yardstick = true, dir = true }

local function options(opts)
  if type(opts) ~= "table" then
    fail_option("expects an options table {against =, tolerance =, rounds =, ...}")
  end
  for key in pairs(opts) do
    if not known_options[key] then fail_option(("unknown option '%s'"):format(tostring(key))) end
  end
  local tolerance = opts.tolerance
  if tolerance == nil then tolerance = 0.03 end
  if type(tolerance) ~= "number" or not (tolerance >= 0) or tolerance == math.huge then
    fail_option(("tolerance must be a finite number >= 0 (0.03 is 3%%), got %s"):format(tostring(tolerance)))
  end
  if opts.x ~= nil and not spk.is_tensor(opts.x) then fail_option("x must be a tensor") end
  if opts.dir ~= nil and type(opts.dir) ~= "string" then fail_option("dir must be a folder name") end
  if opts.yardstick ~= nil and not is_plan(opts.yardstick, "time") then
    fail_option("yardstick must be a plan (with :time)")
  end
  return { against = opts.against, tolerance = tolerance, rounds = check_count(opts.rounds, "rounds", 7, 1),
           replays = check_count(opts.replays, "replays", 5, 1),
           warmup = check_count(opts.warmup, "warmup", 1, 0), x = opts.x, yardstick = opts.yardstick,
           dir = opts.dir }
end

local function time_of(plan, o)
  local t = plan:time { rounds = o.replays, warmup = o.warmup, x = o.x }
  local ms = type(t) == "table" and t.median_ms or nil
  if type(ms) ~= "number" or not (ms > 0) or ms == math.huge then
    raise(("no_slower: %s:time gave no usable median (%s)"):format(M.describe(plan), tostring(ms)))
  end
  return ms
end

-- The order statistic k for which the k-th smallest and the k-th largest of
-- n values enclose their median with at least 95% confidence, whatever their
-- distribution (each value falls below the median with probability 1/2): 1
-- up to n = 8 (the whole range), then growing, so more rounds give a tighter
-- interval.
function M.median_interval_rank(n)
  local k, tail, term = 1, 0, 1 -- term = C(n, i) / 2^n
  for _ = 1, n do term = term / 2 end
  for cand = 1, n // 2 do
    tail = tail + term -- P(at most cand - 1 of the n below the median)
    term = term * (n - (cand - 1)) / cand
    if 1 - 2 * tail >= 0.95 then k = cand else break end
  end
  return k
end

-- Median, min, max and spread of values; for ratios the spread spans the
-- median's 95% interval (M.median_interval_rank), which for up to 8 values is
-- spk.bench's (max - min) / median.
local function summary(values, interval)
  local s = require("spk.bench").summarize(values)
  local out = { median = s.median_ms, min = s.min_ms, max = s.max_ms, spread = s.spread, samples = values }
  if interval then
    local sorted = {}
    for i, v in ipairs(values) do sorted[i] = v end
    table.sort(sorted)
    local k = M.median_interval_rank(#sorted)
    out.low, out.high = sorted[k], sorted[#sorted + 1 - k]
    out.spread = out.median > 0 and (out.high - out.low) / out.median or 0
  end
  return out
end

-- The ratios a / b over o.rounds rounds, timed in turn (A B, B A, ...), after one untimed call each.
function M.time_ratio(a, b, opts)
  local o = options(opts or {}, 2)
  time_of(a, o)
  time_of(b, o)
  local ratios, a_ms, b_ms = {}, {}, {}
  for round = 1, o.rounds do
    local ta, tb
    if round % 2 == 1 then
      ta = time_of(a, o)
      tb = time_of(b, o)
    else
      tb = time_of(b, o)
      ta = time_of(a, o)
    end
    ratios[round], a_ms[round], b_ms[round] = ta / tb, ta, tb
  end
  local r = summary(ratios, true)
  r.a_ms, r.b_ms = summary(a_ms), summary(b_ms)
  return r
end

local function pct(fraction)
  return ("%.1f%%"):format(100 * fraction)
end

local function ratio_words(r)
  local k = M.median_interval_rank(#r.samples)
  local range = k == 1 and "ratios" or ("the median's 95%% interval, ratios %d to %d of"):format(k, #r.samples + 1 - k)
  return ("median ratio %.4f, spread %s (%s %.4f .. %.4f over %d rounds)"):format(r.median, pct(r.spread), range,
    r.low, r.high, #r.samples)
end

-- ------------------------------------------------------------------ speed: stored baselines

function M.baseline_dir()
  if M.config.baseline_dir then return M.config.baseline_dir end
  local env = os.getenv("SPK_BASELINE_DIR")
  if env and env ~= "" then return env end
  return nil
end

local function updating()
  if M.config.update_baseline ~= nil then return M.config.update_baseline end
  local env = os.getenv("SPK_UPDATE_BASELINE")
  return env ~= nil and env ~= "" and env ~= "0"
end

-- The folder of the spec file that called, for baselines/ beside it.
local function caller_folder()
  local info = caller_info()
  return info and info.source:sub(2):match("^(.*)/[^/]*$") or "."
end

local function check_name(name)
  if not name:match("^[%w_.%-]+$") or name:match("^%.") then
    fail_option(("a baseline name is a file name of letters, digits, '_', '-' and '.', got '%s'"):format(name))
  end
end

function M.baseline_path(name, dir)
  check_name(name)
  return (dir or M.baseline_dir() or (caller_folder() .. "/baselines")) .. "/" .. name .. ".json"
end

local function read_all(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return text
end

local function is_entry(t)
  return type(t) == "table" and type(t.ratio) == "table" and type(t.ratio.median) == "number"
    and type(t.device) == "table" and type(t.device_key) == "string"
end

-- The baselines file at path: {format, name, baselines = {entry, ...}}, or
-- nil where there is none; an error naming the file where it is no such file.
function M.load_baselines(path)
  local text = read_all(path)
  if text == nil then return nil end
  local report = require "spk.report"
  local ok, data = pcall(report.json_decode, text)
  if not ok then raise(("no_slower: the baselines file %s is not valid JSON (%s)"):format(path, tostring(data))) end
  if type(data) ~= "table" or data.format ~= M.BASELINE_FORMAT or type(data.baselines) ~= "table" then
    raise(("no_slower: %s is not a baselines file of format %d"):format(path, M.BASELINE_FORMAT))
  end
  for i, e in ipairs(data.baselines) do
    if not is_entry(e) then raise(("no_slower: %s: baseline %d is incomplete"):format(path, i)) end
  end
  data.path = path
  return data
end

local function write_atomic(path, text)
  local dir = path:match("^(.*)/[^/]*$")
  if dir then
    local ok, err = pcall(spk.files.make_folder, dir)
    if not ok then raise("no_slower: " .. tostring(err)) end
  end
  local ok, err = pcall(spk.files.write, path, text)
  if not ok then raise("no_slower: cannot write the baseline: " .. tostring(err)) end
end

local function save_baselines(path, name, entries)
  table.sort(entries, function(a, b) return device_text(a.device) < device_text(b.device) end)
  local report = require "spk.report"
  local data = { format = M.BASELINE_FORMAT, name = name, baselines = report.array(entries) }
  write_atomic(path, report.json_encode(data, { indent = 1 }) .. "\n")
end

-- The default yardstick of a GPU plan: cuDNN standard at its layers, shape and math (nil, why elsewhere).
local function default_yardstick(plan)
  local backend = backend_of(plan)
  if backend == "cpu" then
    return nil, "a cpu plan has no independent yardstick: give one (yardstick = a plan timed beside it)"
  end
  local layers = field(plan, "layers")
  if type(layers) ~= "table" then
    return nil, ("%s carries no layers to build cuDNN's yardstick from: give yardstick = a plan"):format(
      M.describe(plan))
  end
  return spk.lstm.stack { backend = "cudnn", algo = "standard", layers = layers, batch = field(plan, "batch"),
                          steps = field(plan, "steps"), math = field(plan, "math") }
end

local function close(plan)
  if plan ~= nil then pcall(function() plan:close() end) end
end

local function new_entry(plan, yardstick, ratio, o, facts)
  local report = require "spk.report"
  local function stats(s)
    return { median = s.median, min = s.min, max = s.max, spread = s.spread, samples = report.array(s.samples) }
  end
  return { device = facts, device_key = M.device_key(facts), kernel_hash = M.kernel_hash(plan),
           plan = { backend = backend_of(plan), variant = M.describe(plan), shape = shape_of(plan) },
           yardstick = { variant = M.describe(yardstick), shape = shape_of(yardstick) }, ratio = stats(ratio),
           plan_ms = stats(ratio.a_ms),
           yardstick_ms = stats(ratio.b_ms), rounds = o.rounds, replays = o.replays,
           date = os.date("!%Y-%m-%dT%H:%M:%SZ"), spk = spk_version() }
end

local function kernel_words(entry, hash)
  if entry.kernel_hash == hash then return "kernel unchanged since the baseline" end
  return ("kernel changed since the baseline (was %s, now %s)"):format(tostring(entry.kernel_hash):sub(1, 12),
    hash:sub(1, 12))
end

-- Refuses an entry of another device, shape or yardstick (an error, never a verdict).
local function refuse_mismatch(entry, plan, yardstick, facts, where)
  if entry.device_key ~= M.device_key(facts) then
    raise(("no_slower: the baseline%s was recorded on %s; this is %s: refusing to compare across devices "
      .. "(spk test --update-baseline records one for this device)"):format(where, device_text(entry.device),
      device_text(facts)))
  end
  local shape = shape_of(plan)
  if type(entry.plan) ~= "table" or type(entry.plan.shape) ~= "table" or not same_shape(entry.plan.shape, shape) then
    local then_shape = type(entry.plan) == "table" and type(entry.plan.shape) == "table" and entry.plan.shape or {}
    raise(("no_slower: the baseline%s was recorded for %s; this plan is %s: a ratio to the yardstick compares "
      .. "only the same shape"):format(where, shape_words(then_shape), shape_words(shape)))
  end
  local y, then_y = M.describe(yardstick), type(entry.yardstick) == "table" and entry.yardstick or {}
  local y_shape = shape_of(yardstick)
  if then_y.variant ~= y or (type(then_y.shape) == "table" and not same_shape(then_y.shape, y_shape)) then
    local then_shape = type(then_y.shape) == "table" and then_y.shape or {}
    raise(("no_slower: the baseline%s was timed against the yardstick %s (%s), this run against %s (%s)"):format(
      where, tostring(then_y.variant), shape_words(then_shape), y, shape_words(y_shape)))
  end
end

local function judge(result, tolerance, noise)
  result.allowed = tolerance + noise
  result.slower = result.slowdown > result.allowed
  result.tolerance = tolerance
  if result.slowdown ~= result.slowdown then
    raise("no_slower: the ratio is not a number (a time of 0 or NaN)")
  end
  return result
end

local function verdict_words(result)
  local noise = result.allowed - result.tolerance
  if result.slower then
    return ("a slowdown of %s exceeds the tolerance %s + spread %s"):format(pct(result.slowdown),
      pct(result.tolerance), pct(noise))
  end
  return ("a slowdown of %s is within the tolerance %s + spread %s"):format(pct(result.slowdown),
    pct(result.tolerance), pct(noise))
end

-- Two plans in words; where their descriptions are the same, with their shapes.
local function two_names(a, b)
  local na, nb = M.describe(a), M.describe(b)
  if na == nb then
    na, nb = ("%s (%s)"):format(na, shape_words(shape_of(a))), ("%s (%s)"):format(nb, shape_words(shape_of(b)))
  end
  return na, nb
end

local function against_plan(plan, baseline, o)
  local r = M.time_ratio(plan, baseline, o)
  local result = judge({ ratio = r, slowdown = r.median - 1 }, o.tolerance, r.spread)
  local na, nb = two_names(plan, baseline)
  result.message = ("%s against %s: %s; %s\n  (plan median %.4g ms, baseline median %.4g ms; ratios plan / "
    .. "baseline, timed in turn)"):format(na, nb, ratio_words(r), verdict_words(result), r.a_ms.median,
    r.b_ms.median)
  return result
end

local function against_entry(plan, entry, yardstick, o, facts, where)
  refuse_mismatch(entry, plan, yardstick, facts, where)
  local r = M.time_ratio(plan, yardstick, o)
  local relative = r.median / entry.ratio.median
  local result = judge({ ratio = r, baseline = entry, slowdown = relative - 1 }, o.tolerance,
    r.spread + (entry.ratio.spread or 0))
  local np, ny = two_names(plan, yardstick)
  result.message = ("%s against the baseline%s (recorded %s on %s; %s): ratio to the yardstick %s %.4f now, "
    .. "%.4f then (x%.4f); spread %s now, %s then; %s"):format(np, where, tostring(entry.date),
    tostring(entry.device.device), kernel_words(entry, M.kernel_hash(plan)), ny, r.median, entry.ratio.median,
    relative, pct(r.spread), pct(entry.ratio.spread or 0), verdict_words(result))
  return result
end

-- A stored baseline by name: compared, or recorded (first run on this device, or updating).
local function against_name(plan, name, yardstick, o, facts)
  local path = M.baseline_path(name, o.dir)
  local data = M.load_baselines(path)
  local entries = data and data.baselines or {}
  local key = M.device_key(facts)
  local mine, others = nil, {}
  for _, e in ipairs(entries) do
    if e.device_key == key then mine = e else others[#others + 1] = e end
  end
  local where = (" '%s' (%s)"):format(name, path)
  if mine and not updating() then return against_entry(plan, mine, yardstick, o, facts, where) end
  local r = M.time_ratio(plan, yardstick, o)
  local entry = new_entry(plan, yardstick, r, o, facts)
  others[#others + 1] = entry
  save_baselines(path, name, others)
  local why = mine and "updated (--update-baseline)" or "recorded: no baseline for this device yet"
  if not mine and #others > 1 then
    local devices = {}
    for i = 1, #others - 1 do devices[#devices + 1] = device_text(others[i].device) end
    why = why .. " (the file has one for " .. table.concat(devices, "; ") .. ")"
  end
  local np, ny = two_names(plan, yardstick)
  return { recorded = path, ratio = r, entry = entry,
           message = ("baseline%s %s: %s against the yardstick %s, %s on %s; the next run compares against it"):format(
             where, why, np, ny, ratio_words(r), device_text(facts)) }
end

function M.compare_speed(plan, opts)
  if not is_plan(plan, "time") then
    fail_option(("the plan must have :time (a plan of spk.lstm.stack), got %s"):format(type(plan)))
  end
  local o = options(opts)
  local against = o.against
  if against == nil then
    fail_option("give against = a baseline plan, a stored baseline's name or a baseline record")
  end
  if is_plan(against, "time") then return against_plan(plan, against, o) end
  if type(against) ~= "string" and type(against) ~= "table" then
    fail_option(("against must be a plan, a stored baseline's name or a baseline record, got %s"):format(
      type(against)))
  end
  if type(against) == "string" then check_name(against) end
  local facts = M.device_facts(plan)
  local yardstick, made = o.yardstick, false
  if not yardstick then
    local why
    yardstick, why = default_yardstick(plan)
    if not yardstick then fail_option(why) end
    made = true
  end
  local ok, result = pcall(function()
    if type(against) == "string" then return against_name(plan, against, yardstick, o, facts) end
    if is_entry(against) then return against_entry(plan, against, yardstick, o, facts, "") end
    if type(against.baselines) == "table" then
      local key = M.device_key(facts)
      local where = against.path and (" in %s"):format(against.path) or ""
      for _, e in ipairs(against.baselines) do
        if is_entry(e) and e.device_key == key then return against_entry(plan, e, yardstick, o, facts, where) end
      end
      local first = against.baselines[1]
      if is_entry(first) then return against_entry(plan, first, yardstick, o, facts, where) end -- refused there
      raise(("no_slower: the baselines%s hold none"):format(where))
    end
    raise("no_slower: against is a table but neither a baseline nor a baselines file")
  end)
  if made then close(yardstick) end
  if not ok then error(result, 0) end
  return result
end

-- Under spk test, a passing comparison says what it measured (a failing one says it in its message).
local function report_line(result)
  if M.config.report and not result.slower then
    io.stdout:flush()
    io.stderr:write("no_slower: ", result.message, "\n")
  end
end

register("no_slower", "Expected the plan not to be slower than its baseline",
  "Expected the plan to be slower than its baseline", function(arguments)
    local result = M.compare_speed(arguments[1], arguments[2])
    if result.recorded then return false, result.message, result.message end
    report_line(result)
    return not result.slower, result.message
  end)

return M
