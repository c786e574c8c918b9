-- Runs busted with this interpreter (lua5.4, or the spk program under the
-- sanitizers), so the suites do not depend on which Lua /usr/bin/busted uses.
require "busted.runner" ({ standalone = false })
