/* core.doc_registry(): the doc registry (lua/bind.h keeps it) handed to
 * lua/spk/doc.lua, which reads and extends it. */
#include "lua/areas.h"

static int l_doc_registry(lua_State *L)
{
    spk_lua_push_doc_registry(L);
    return 2;
}

void spk_open_doc(lua_State *L, int module)
{
    static const spk_lua_checked_reg functions[] = {
        {"doc_registry", l_doc_registry,
         "spk.core.doc_registry() -> values, types\n"
         "The doc registry behind help(): values maps each documented function or table to its text (weak\n"
         "keys); types maps a userdata type's metatable name to {methods =, doc =}. lua/spk/doc.lua reads\n"
         "and extends them.",
         ""},
        {NULL, NULL, NULL, NULL},
    };
    lua_pushvalue(L, module);
    spk_lua_setfuncs_module(L, functions, "spk.core");
    lua_pop(L, 1);
}
