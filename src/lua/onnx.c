/* Lua bindings of the ONNX LSTM-stack reader and writer (src/lstm/onnx_stack.h):
 * core.onnx.load_lstm(path) -> {{W =, R =, B =}, ...} and
 * core.onnx.save_lstm(path, layers). lua/spk/lstm.lua calls them for .onnx
 * paths. Tables are read with raw access, before any tensor pointer is held. */
#include <string.h>

#include "core/error.h"
#include "lstm/onnx_stack.h"
#include "lua/areas.h"

static int l_load_lstm(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    spk_lstm_weights w[SPK_LSTM_ONNX_MAX_LAYERS];
    int count;
    if (spk_lstm_load_onnx(path, w, SPK_LSTM_ONNX_MAX_LAYERS, &count))
        return spk_lua_fail(L);
    lua_createtable(L, count, 0);
    for (int k = 0; k < count; k++) {
        spk_tensor *parts[3] = {w[k].W, w[k].R, w[k].B};
        static const char *const names[3] = {"W", "R", "B"};
        lua_createtable(L, 0, 3);
        for (int i = 0; i < 3; i++) {
            spk_lua_pushtensor(L, parts[i]); /* Lua owns it from here */
            lua_setfield(L, -2, names[i]);
        }
        lua_rawseti(L, -2, k + 1);
    }
    return 1;
}

/* Field `key` of the layer table at `idx`: an open tensor's userdata, or an
 * error. The tensor itself is taken only after the last allocation. */
static spk_lua_tensor *layer_part(lua_State *L, int idx, int layer, const char *key)
{
    lua_pushstring(L, key);
    lua_rawget(L, idx);
    spk_lua_tensor *u = luaL_testudata(L, -1, SPK_TENSOR_MT);
    if (!u || !u->t)
        luaL_error(L, "layer %d: %s is %s, expected a tensor", layer, key,
                   u ? "a closed tensor" : lua_isnil(L, -1) ? "missing" : luaL_typename(L, -1));
    lua_pop(L, 1); /* the layers table keeps the tensor alive */
    return u;
}

static int l_save_lstm(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Unsigned n = lua_rawlen(L, 2);
    if (n < 1 || n > SPK_LSTM_ONNX_MAX_LAYERS)
        return luaL_argerror(L, 2, lua_pushfstring(L, "a stack of 1 to %d layers {W =, R =, B =}, got %d",
                                                   SPK_LSTM_ONNX_MAX_LAYERS, (int)(n > 999 ? 999 : n)));
    spk_lua_tensor *parts[SPK_LSTM_ONNX_MAX_LAYERS][3];
    for (lua_Unsigned k = 1; k <= n; k++) {
        if (lua_rawgeti(L, 2, (lua_Integer)k) != LUA_TTABLE)
            return luaL_error(L, "layer %d is not a table {W =, R =, B =} (got %s)", (int)k, luaL_typename(L, -1));
        int idx = lua_gettop(L);
        parts[k - 1][0] = layer_part(L, idx, (int)k, "W");
        parts[k - 1][1] = layer_part(L, idx, (int)k, "R");
        parts[k - 1][2] = layer_part(L, idx, (int)k, "B");
        lua_pop(L, 1);
    }
    /* No Lua code or allocation from here: a finalizer cannot close them now. */
    spk_lstm_layer layers[SPK_LSTM_ONNX_MAX_LAYERS];
    for (lua_Unsigned k = 0; k < n; k++) {
        if (!parts[k][0]->t || !parts[k][1]->t || !parts[k][2]->t)
            return luaL_error(L, "layer %d: a tensor was closed while the stack was read", (int)k + 1);
        layers[k] = (spk_lstm_layer){parts[k][0]->t, parts[k][1]->t, parts[k][2]->t};
    }
    if (spk_lstm_save_onnx(path, layers, (int)n))
        return spk_lua_fail(L);
    return 0;
}

void spk_open_onnx(lua_State *L, int module)
{
    static const spk_lua_checked_reg functions[] = {
        {"load_lstm", l_load_lstm,
         "spk.onnx.load_lstm(path) -> {{W =, R =, B =}, ...}\n"
         "The LSTM stack of an ONNX model in spk's layout (spk.lstm.load calls it for .onnx paths).",
         "path"},
        {"save_lstm", l_save_lstm,
         "spk.onnx.save_lstm(path, layers)\n"
         "Writes the stack as an ONNX model x [batch, steps, in] -> y [batch, steps, 2H] (spk.lstm.save,\n"
         "format \"onnx\").",
         "path, layers"},
        {NULL, NULL, NULL, NULL},
    };
    lua_newtable(L);
    spk_lua_setfuncs_module(L, functions, "spk.onnx");
    lua_setfield(L, module, "onnx");
}
