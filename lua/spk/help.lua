-- help(): spk.help(x) prints what the doc registry (lua/spk/doc.lua) holds
-- for x: a function's documentation, a table's or an area's names with the
-- first line of each, a tensor's methods; help() lists the areas and
-- help "word" finds the names that mention a word. The REPL makes it the
-- global `help` (and `?name` at the prompt calls it). This file also
-- declares the areas of the library modules, which load on first use.
return function(spk, core)
  local doc = require "spk.doc"

  -- An argument it does not take is an error naming it (spk.options.takes).
  spk.help = require("spk.options").takes(1, "spk.help", function(...) print(doc.help_text(...)) end)
  doc(spk.help, [[
spk.help([x | "topic"])
Prints the documentation of x (a function, a table, a tensor or another spk object); help() lists
the areas, help "lstm" prints one, help "word" finds the names that mention word. In the REPL it is
the global help, and ?name at the prompt does the same.]])

  local library = {
    { "report", "aligned text tables, CSV and JSON (require \"spk.report\")" },
    { "plot", "SVG line and bar charts with log axes (require \"spk.plot\")" },
    { "benchmark", "every backend side by side, timed and checked: what spk bench runs (require \"spk.benchmark\")" },
    { "experiment", "options, results folders and progress for experiment scripts (require \"spk.experiment\")" },
    { "tuning", "the tuning record spk tune writes and backend \"auto\" reads (require \"spk.tuning\")" },
    { "options", "argument parsing, exit statuses and tool start shared by the spk commands (require \"spk.options\")" },
    { "provenance", "where a result came from: the record every results file carries (require \"spk.provenance\")" },
    { "progress", "the status line of long work, on a terminal only (require \"spk.progress\")" },
  }
  for _, entry in ipairs(library) do
    doc.area { name = entry[1], summary = entry[2], source = "spk." .. entry[1], require = "spk." .. entry[1] }
  end
  doc.area { name = "repl", summary = "the interactive session: printing results, completion, help (spk repl)",
             source = "spk.repl", require = "spk.repl" }
  doc.area { name = "core", summary = "the C bindings behind the areas (spk.core): low-level, each documented too",
             source = "spk", contents = { core } }
end
