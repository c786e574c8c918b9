/* What the bindings of plans with a timeline build share with the timeline's
 * own (src/lua/timeline.c): the selection a Lua side hands over (the C form,
 * 0-based: {layer =, direction =, first_step =, steps =, first_block =,
 * blocks =, warp =}, read raw, its keys checked), and the decode's columns,
 * clock and a kernel's stages pushed as Lua tables. */
#ifndef SPK_LUA_TIMELINE_H
#define SPK_LUA_TIMELINE_H

#include "cuda/timeline.h"
#include "lua/bind.h"

/* The selection table at idx (a Lua error naming what is wrong); makes no
 * allocation but for its errors, so pointers taken before stay valid. */
void spk_lua_read_timeline_selection(lua_State *L, int idx, spk_timeline_selection *sel);
/* {{name =, unit =, about =}, ...}: the columns of a decode with these stages. */
void spk_lua_push_timeline_columns(lua_State *L, const spk_timeline_stages *stages);
/* The alignment and the selection the buffer's header gave (0-based). */
void spk_lua_push_timeline_clock(lua_State *L, const spk_timeline_clock *clock);
/* Sets t.stages = {"wait", ...} and t.waits_for = {wait = "publish", ...} (by
 * name) on the table at the top. */
void spk_lua_set_timeline_stages(lua_State *L, const spk_timeline_stages *stages);

#endif
