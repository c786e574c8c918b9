/* spk's auxiliary library for its Lua bindings: see bind.h. This file calls
 * no other file of src/lua; every binding builds on it. */
#include "lua/bind.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "lstm/fields.h"
#include "lstm/kernel_stack.h"
#include "lstm/lstm.h"

/* ---- raw readers ---------------------------------------------------------- */

int spk_lua_rawfield(lua_State *L, int idx, const char *key)
{
    idx = lua_absindex(L, idx);
    luaL_checkstack(L, 3, "reading a table");
    size_t n = strlen(key);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -2) == LUA_TSTRING) {
            size_t len;
            const char *k = lua_tolstring(L, -2, &len);
            if (len == n && memcmp(k, key, n) == 0) {
                lua_remove(L, -2);
                return lua_type(L, -1);
            }
        }
        lua_pop(L, 1);
    }
    lua_pushnil(L);
    return LUA_TNIL;
}

int spk_lua_rawglobal(lua_State *L, const char *name)
{
    lua_pushglobaltable(L);
    int type = spk_lua_rawfield(L, -1, name);
    lua_remove(L, -2);
    return type;
}

int spk_lua_rawcount(lua_State *L, int idx)
{
    lua_Unsigned n = lua_rawlen(L, idx);
    return n > INT_MAX ? INT_MAX : (int)n;
}

/* ---- values in messages -------------------------------------------------- */

const char *spk_lua_typename(lua_State *L, int idx)
{
    if (lua_type(L, idx) != LUA_TUSERDATA)
        return luaL_typename(L, idx);
    spk_lua_tensor *t = luaL_testudata(L, idx, SPK_TENSOR_MT);
    if (t)
        return t->t ? "tensor" : "closed tensor";
    const char *name = NULL;
    if (lua_getmetatable(L, idx)) {
        if (spk_lua_rawfield(L, -1, "__name") == LUA_TSTRING)
            name = lua_tostring(L, -1); /* kept alive by the metatable */
        lua_pop(L, 2);
    }
    if (!name)
        return "userdata of another library";
    /* spk's own objects without the prefix: "generator", "cuda.module" */
    if (strncmp(name, "spk.", 4) == 0)
        return name + 4;
    return name;
}

int spk_lua_typeerror(lua_State *L, int arg, const char *expected)
{
    const char *got = spk_lua_typename(L, arg);
    return luaL_argerror(L, arg, lua_pushfstring(L, "%s expected, got %s", expected, got));
}

void spk_lua_setint(lua_State *L, const char *key, lua_Integer v)
{
    lua_pushinteger(L, v);
    lua_setfield(L, -2, key);
}

void spk_lua_setbool(lua_State *L, const char *key, bool v)
{
    lua_pushboolean(L, v);
    lua_setfield(L, -2, key);
}

void spk_lua_setstring(lua_State *L, const char *key, const char *v)
{
    lua_pushstring(L, v);
    lua_setfield(L, -2, key);
}

void spk_lua_setnumber(lua_State *L, const char *key, lua_Number v)
{
    lua_pushnumber(L, v);
    lua_setfield(L, -2, key);
}

void spk_lua_setfields(lua_State *L, const spk_fields *f)
{
    for (int i = 0; i < f->count; i++) {
        const spk_field *x = &f->at[i];
        if (x->kind == SPK_FIELD_TEXT)
            lua_pushstring(L, x->text);
        else if (x->kind == SPK_FIELD_BOOL)
            lua_pushboolean(L, x->value != 0);
        else
            lua_pushinteger(L, (lua_Integer)x->value);
        lua_setfield(L, -2, x->name);
    }
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void spk_lua_push_sorted(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    int n = spk_lua_rawcount(L, idx);
    const char **names = lua_newuserdatauv(L, sizeof *names * (size_t)(n ? n : 1), 0);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, idx, i + 1);
        names[i] = lua_tostring(L, -1); /* kept alive by the list */
        lua_pop(L, 1);
    }
    qsort(names, (size_t)n, sizeof *names, compare_strings);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushstring(L, names[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_remove(L, -2); /* the buffer */
}

void spk_lua_push_folder_names(lua_State *L, DIR *d, bool (*keep)(const char *name))
{
    lua_newtable(L);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!keep(e->d_name))
            continue;
        lua_pushstring(L, e->d_name);
        lua_rawseti(L, -2, ++n);
    }
    closedir(d);
    spk_lua_push_sorted(L, -1);
}

int spk_lua_checkintegers(lua_State *L, int arg, int64_t *out, int min, int max, const char *what)
{
    luaL_checktype(L, arg, LUA_TTABLE);
    int n = spk_lua_rawcount(L, arg);
    if (n < min || n > max)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s must list %d .. %d integers, got %d", what, min, max, n));
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, arg, i + 1);
        int ok = 0;
        out[i] = (int64_t)lua_tointegerx(L, -1, &ok);
        if (!ok || lua_type(L, -1) != LUA_TNUMBER)
            luaL_argerror(L, arg, lua_pushfstring(L, "%s[%d] must be an integer, got %s", what, i + 1,
                                                  spk_lua_describe(L, -1)));
        lua_pop(L, 1);
    }
    return n;
}

void *spk_lua_checkudata(lua_State *L, int idx, const char *metatable, const char *name)
{
    void *u = luaL_testudata(L, idx, metatable);
    if (!u)
        spk_lua_typeerror(L, idx, name);
    return u;
}

const char *spk_lua_describe(lua_State *L, int idx)
{
    switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx))
            return lua_pushfstring(L, "number %I", (LUAI_UACINT)lua_tointeger(L, idx));
        if (lua_tonumber(L, idx) != lua_tonumber(L, idx))
            return lua_pushstring(L, "number nan"); /* whatever its sign bit */
        return lua_pushfstring(L, "number %f", (LUAI_UACNUMBER)lua_tonumber(L, idx));
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        if (len > 40)
            return lua_pushfstring(L, "string \"%.37s...\"", s);
        return lua_pushfstring(L, "string \"%s\"", s);
    }
    case LUA_TBOOLEAN: return lua_pushstring(L, lua_toboolean(L, idx) ? "boolean true" : "boolean false");
    default: return lua_pushstring(L, spk_lua_typename(L, idx));
    }
}

static const char *article(const char *word) { return strchr("aeioAEIO", word[0]) ? "an" : "a"; }

/* ---- registration ------------------------------------------------------ */

/* Upvalues of a checked function: the entry, the self kind (or nil), the
 * owner table's name (or nil), the most arguments it takes (-1: any, the
 * function checks with check_end), the spk_lua_type of a type's method (or
 * nil) and whether the method also serves a closed object. */
#define UP_FN 1
#define UP_SELF 2
#define UP_OWNER 3
#define UP_MAX 4
#define UP_TYPE 5
#define UP_ANY_STATE 6
#define UPVALUES 6

static int count_params(const char *params, bool *varargs)
{
    *varargs = false;
    if (!params || !*params)
        return 0;
    int n = 1;
    for (const char *p = params; *p; p++)
        n += *p == ',';
    *varargs = strstr(params, "...") != NULL;
    return n;
}

static const spk_lua_self *upvalue_self(lua_State *L) { return lua_touserdata(L, lua_upvalueindex(UP_SELF)); }

static bool self_is_closed(lua_State *L, const spk_lua_self *self)
{
    const spk_lua_type *type = lua_touserdata(L, lua_upvalueindex(UP_TYPE));
    if (type) {
        void **u = luaL_testudata(L, 1, type->metatable);
        return u && !*u;
    }
    return self->is_closed && self->is_closed(L, 1);
}

/* The extra-argument error for argument `arg` of the running checked function. */
static int extra_argument(lua_State *L, int arg)
{
    const spk_lua_checked_reg *fn = lua_touserdata(L, lua_upvalueindex(UP_FN));
    const spk_lua_self *self = upvalue_self(L);
    if (self && self_is_closed(L, self))
        luaL_argerror(L, 1, lua_pushfstring(L, "%s is closed", self->name));
    const char *what = spk_lua_describe(L, arg);
    const char *name = fn ? fn->name : "?";
    const char *params = fn && fn->params ? fn->params : "";
    const char *owner = lua_tostring(L, lua_upvalueindex(UP_OWNER));
    const char *sig = self ? lua_pushfstring(L, "%s:%s", self->name, name)
                           : lua_pushfstring(L, "%s.%s", owner ? owner : "spk", name);
    sig = *params ? lua_pushfstring(L, "%s takes (%s)", sig, params) : lua_pushfstring(L, "%s takes no arguments", sig);
    return luaL_argerror(L, arg, lua_pushfstring(L, "unexpected argument (%s): %s", what, sig));
}

void spk_lua_check_end(lua_State *L, int first)
{
    int top = lua_gettop(L);
    for (int i = first; i <= top; i++)
        if (!lua_isnil(L, i))
            extra_argument(L, i);
}

/* A method of a type: argument 1 an object of it, open unless the method
 * serves closed ones too. */
static void check_self(lua_State *L, const spk_lua_type *type)
{
    void **u = luaL_testudata(L, 1, type->metatable);
    if (!u)
        spk_lua_typeerror(L, 1, type->name);
    if (!*u && !lua_toboolean(L, lua_upvalueindex(UP_ANY_STATE)))
        luaL_argerror(L, 1, lua_pushfstring(L, "%s is closed", type->name));
}

static int checked_call(lua_State *L)
{
    const spk_lua_checked_reg *fn = lua_touserdata(L, lua_upvalueindex(UP_FN));
    const spk_lua_type *type = lua_touserdata(L, lua_upvalueindex(UP_TYPE));
    if (type)
        check_self(L, type);
    lua_Integer max = lua_tointeger(L, lua_upvalueindex(UP_MAX));
    if (max >= 0 && lua_gettop(L) > max) {
        spk_lua_check_end(L, (int)max + 1);
        lua_settop(L, (int)max); /* only nils were past the end */
    }
    return fn->func(L);
}

static void setfuncs(lua_State *L, const spk_lua_checked_reg *fns, const spk_lua_self *self, const char *owner,
                     const spk_lua_type *type, bool any_state)
{
    luaL_checkstack(L, UPVALUES + 2, "registering functions");
    for (; fns->name; fns++) {
        if (!fns->doc || !fns->doc[0])
            luaL_error(L, "spk: binding '%s' has no documentation (give it a doc beside its registration)",
                       fns->name);
        bool varargs;
        int n = count_params(fns->params, &varargs);
        lua_pushlightuserdata(L, (void *)fns);
        if (self)
            lua_pushlightuserdata(L, (void *)self);
        else
            lua_pushnil(L);
        if (owner)
            lua_pushstring(L, owner);
        else
            lua_pushnil(L);
        lua_pushinteger(L, varargs ? -1 : n + (self ? 1 : 0));
        if (type)
            lua_pushlightuserdata(L, (void *)type);
        else
            lua_pushnil(L);
        lua_pushboolean(L, any_state);
        lua_pushcclosure(L, checked_call, UPVALUES);
        spk_lua_setdoc(L, -1, fns->doc);
        lua_setfield(L, -2, fns->name);
    }
}

void spk_lua_setfuncs_checked(lua_State *L, const spk_lua_checked_reg *fns, const spk_lua_self *self)
{
    setfuncs(L, fns, self, NULL, NULL, false);
}

void spk_lua_setfuncs_module(lua_State *L, const spk_lua_checked_reg *fns, const char *owner)
{
    setfuncs(L, fns, NULL, owner, NULL, false);
}

void spk_lua_register(lua_State *L, int table, const spk_lua_checked_reg *fns, const char *owner)
{
    lua_pushvalue(L, table);
    setfuncs(L, fns, NULL, owner, NULL, false);
    lua_pop(L, 1);
}

/* ---- userdata types ------------------------------------------------------ */

void spk_lua_push_methods(lua_State *L, const char *metatable)
{
    lua_pushfstring(L, "%s.methods", metatable);
    const char *key = lua_tostring(L, -1);
    if (spk_lua_rawfield(L, LUA_REGISTRYINDEX, key) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_setfield(L, LUA_REGISTRYINDEX, key);
    }
    lua_remove(L, -2);
}

void spk_lua_push_tensor_methods(lua_State *L) { spk_lua_push_methods(L, SPK_TENSOR_MT); }

void spk_lua_setmethods_any_state(lua_State *L, spk_lua_type *type, const spk_lua_checked_reg *fns)
{
    spk_lua_push_methods(L, type->metatable);
    setfuncs(L, fns, &type->self, NULL, type, true);
    lua_pop(L, 1);
}

/* __gc, __close (upvalue 1: the type) and close (the checked call's type):
 * the pointer taken out of the object, then freed. */
static int release_object(lua_State *L, const spk_lua_type *type)
{
    void **u = luaL_checkudata(L, 1, type->metatable);
    void *p = *u;
    *u = NULL;
    if (p)
        type->free(p);
    return 0;
}

static int release_metamethod(lua_State *L) { return release_object(L, lua_touserdata(L, lua_upvalueindex(1))); }

static int close_method(lua_State *L) { return release_object(L, lua_touserdata(L, lua_upvalueindex(UP_TYPE))); }

static int tostring_metamethod(lua_State *L)
{
    const spk_lua_type *type = lua_touserdata(L, lua_upvalueindex(1));
    void *p = spk_lua_toobject(L, 1, type);
    if (p)
        type->tostring(L, p);
    else if (type->closed)
        lua_pushstring(L, type->closed);
    else
        lua_pushfstring(L, "%s (closed)", type->name);
    return 1;
}

void spk_lua_newtype(lua_State *L, spk_lua_type *type)
{
    type->self = (spk_lua_self){type->name, NULL};
    luaL_newmetatable(L, type->metatable);
    spk_lua_push_methods(L, type->metatable);
    if (type->methods)
        setfuncs(L, type->methods, &type->self, NULL, type, false);
    if (type->free) {
        /* closing twice is fine */
        type->close_entry[0] = (spk_lua_checked_reg){
            "close", close_method,
            type->close_doc ? type->close_doc
                            : "x:close()\nReleases it now (also at <close> and collection); later use is an error.",
            ""};
        type->close_entry[1] = (spk_lua_checked_reg){NULL, NULL, NULL, NULL};
        setfuncs(L, type->close_entry, &type->self, NULL, type, true);
        static const char *const releases[] = {"__gc", "__close"};
        for (int i = 0; i < 2; i++) {
            lua_pushlightuserdata(L, type);
            lua_pushcclosure(L, release_metamethod, 1);
            lua_setfield(L, -3, releases[i]);
        }
    }
    spk_lua_settype(L, type->metatable, -1, type->doc);
    if (type->index) {
        lua_setfield(L, -2, "methods");
        lua_pushcfunction(L, type->index);
    }
    lua_setfield(L, -2, "__index");
    if (type->tostring) {
        lua_pushlightuserdata(L, type);
        lua_pushcclosure(L, tostring_metamethod, 1);
        lua_setfield(L, -2, "__tostring");
    }
    lua_pop(L, 1);
}

void **spk_lua_newobject(lua_State *L, const spk_lua_type *type)
{
    void **u = lua_newuserdatauv(L, sizeof *u, 0);
    *u = NULL;
    luaL_setmetatable(L, type->metatable);
    return u;
}

void *spk_lua_checkobject(lua_State *L, int idx, const spk_lua_type *type)
{
    void **u = luaL_testudata(L, idx, type->metatable);
    if (!u)
        spk_lua_typeerror(L, idx, type->name);
    if (!*u)
        luaL_argerror(L, idx, lua_pushfstring(L, "%s is closed", type->name));
    return *u;
}

void *spk_lua_toobject(lua_State *L, int idx, const spk_lua_type *type)
{
    void **u = luaL_testudata(L, idx, type->metatable);
    return u ? *u : NULL;
}

/* ---- options ---------------------------------------------------------------- */

const char *spk_lua_unknown_key(lua_State *L, int idx, const char *const *known)
{
    idx = lua_absindex(L, idx);
    for (const char *const *k = known; lua_type(L, idx) == LUA_TSTRING && *k; k++)
        if (strcmp(*k, lua_tostring(L, idx)) == 0)
            return NULL;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (const char *const *k = known; *k; k++) {
        if (k != known)
            luaL_addstring(&b, ", ");
        luaL_addstring(&b, *k);
    }
    luaL_pushresult(&b);
    const char *names = lua_tostring(L, -1);
    if (lua_type(L, idx) == LUA_TSTRING)
        return lua_pushfstring(L, "unknown option '%s' (known: %s)", lua_tostring(L, idx), names);
    const char *type = luaL_typename(L, idx);
    return lua_pushfstring(L, "unknown option %s (%s %s key; known: %s)", spk_lua_describe(L, idx), article(type), type,
                           names);
}

void spk_lua_checkkeys(lua_State *L, int idx, const char *const *known, const char *where)
{
    if (lua_type(L, idx) != LUA_TTABLE)
        return;
    idx = lua_absindex(L, idx);
    luaL_checkstack(L, 4, "reading a table");
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        const char *message = spk_lua_unknown_key(L, -1, known);
        if (message)
            luaL_error(L, "%s: %s", where, message);
    }
}

bool spk_lua_checkoptions(lua_State *L, int arg, const char *const *known)
{
    if (lua_isnoneornil(L, arg))
        return false;
    luaL_checktype(L, arg, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, arg)) {
        lua_pop(L, 1);
        const char *message = spk_lua_unknown_key(L, -1, known);
        if (message)
            luaL_argerror(L, arg, message);
    }
    return true;
}

const char *spk_lua_push_choices(lua_State *L, const char *const *names)
{
    int n = 0;
    while (names[n])
        n++;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; i < n; i++) {
        luaL_addstring(&b, i == 0 ? "\"" : i + 1 == n ? " or \"" : ", \"");
        luaL_addstring(&b, names[i]);
        luaL_addchar(&b, '"');
    }
    luaL_pushresult(&b);
    return lua_tostring(L, -1);
}

int spk_lua_checkoption(lua_State *L, int idx, int def, const char *const *names, const char *what)
{
    idx = lua_absindex(L, idx);
    if (lua_isnoneornil(L, idx) && def >= 0)
        return def;
    if (lua_type(L, idx) == LUA_TSTRING)
        for (int i = 0; names[i]; i++)
            if (strcmp(names[i], lua_tostring(L, idx)) == 0)
                return i;
    const char *choices = spk_lua_push_choices(L, names);
    const char *got = lua_type(L, idx) == LUA_TSTRING ? lua_pushfstring(L, "\"%s\"", lua_tostring(L, idx))
                                                        : spk_lua_describe(L, idx);
    if (!what)
        return luaL_argerror(L, idx, lua_pushfstring(L, "must be %s, got %s", choices, got));
    return luaL_error(L, "%s must be %s, got %s", what, choices, got);
}

lua_Integer spk_lua_intfield(lua_State *L, int t, const char *key, lua_Integer def, lua_Integer lo, lua_Integer hi,
                             const char *where)
{
    int type = spk_lua_rawfield(L, t, key);
    lua_Integer v = def;
    if (type != LUA_TNIL) {
        int ok = 0;
        v = lua_tointegerx(L, -1, &ok);
        if (!ok || type != LUA_TNUMBER)
            luaL_error(L, "%s.%s must be an integer, got %s", where, key, spk_lua_describe(L, -1));
    } else if (def < lo) {
        luaL_error(L, "%s.%s is required", where, key);
    }
    if (v < lo || v > hi)
        luaL_error(L, "%s.%s must be %I .. %I, got %I", where, key, lo, hi, v);
    lua_pop(L, 1);
    return v;
}

bool spk_lua_boolfield(lua_State *L, int t, const char *key, const char *where)
{
    int type = spk_lua_rawfield(L, t, key);
    if (type != LUA_TNIL && type != LUA_TBOOLEAN)
        luaL_error(L, "%s.%s must be true or false, got %s", where, key, spk_lua_describe(L, -1));
    bool v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

const char *spk_lua_stringfield(lua_State *L, int t, const char *key, const char *where)
{
    int type = spk_lua_rawfield(L, t, key);
    if (type == LUA_TNIL)
        return NULL;
    if (type != LUA_TSTRING)
        luaL_error(L, "%s.%s must be a string, got %s", where, key, spk_lua_describe(L, -1));
    size_t len;
    const char *v = lua_tolstring(L, -1, &len);
    if (strlen(v) != len) /* NVRTC and the file system would stop reading at the NUL */
        luaL_error(L, "%s.%s holds a NUL byte at offset %d (of %d)", where, key, (int)strlen(v), (int)len);
    return v;
}

static bool positive_int(lua_State *L, int idx)
{
    return lua_isinteger(L, idx) && lua_tointeger(L, idx) >= 1 && lua_tointeger(L, idx) <= 0x7fffffff;
}

void spk_lua_dim3field(lua_State *L, int t, const char *key, unsigned out[3], unsigned fallback, const char *where)
{
    int type = spk_lua_rawfield(L, t, key);
    out[0] = fallback, out[1] = out[2] = fallback ? 1 : 0;
    if (type == LUA_TNUMBER && positive_int(L, -1)) {
        out[0] = (unsigned)lua_tointeger(L, -1), out[1] = out[2] = 1;
    } else if (type == LUA_TTABLE) {
        int n = spk_lua_rawcount(L, -1);
        if (n < 1 || n > 3)
            luaL_error(L, "%s.%s must be {x[, y[, z]]}, got %d entries", where, key, n);
        out[0] = out[1] = out[2] = 1;
        for (int i = 0; i < n; i++) {
            lua_rawgeti(L, -1, i + 1);
            if (!positive_int(L, -1))
                luaL_error(L, "%s.%s[%d] must be a positive integer, got %s", where, key, i + 1,
                           spk_lua_describe(L, -1));
            out[i] = (unsigned)lua_tointeger(L, -1);
            lua_pop(L, 1);
        }
    } else if (type != LUA_TNIL) {
        luaL_error(L, "%s.%s must be a positive integer or {x, y, z}, got %s", where, key, spk_lua_describe(L, -1));
    }
    lua_pop(L, 1);
}

double spk_lua_optfield_number(lua_State *L, int arg, const char *key, double fallback)
{
    if (lua_type(L, arg) != LUA_TTABLE)
        return fallback;
    spk_lua_rawfield(L, arg, key);
    double v = fallback;
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TNUMBER)
            luaL_argerror(L, arg, lua_pushfstring(L, "option '%s' must be a number, got %s", key,
                                                  spk_lua_typename(L, -1)));
        v = lua_tonumber(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

spk_dtype spk_lua_optfield_dtype(lua_State *L, int arg, spk_dtype fallback)
{
    if (lua_type(L, arg) != LUA_TTABLE)
        return fallback;
    spk_lua_rawfield(L, arg, "dtype");
    spk_dtype dtype = fallback;
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TSTRING || spk_dtype_from_name(lua_tostring(L, -1), &dtype) != 0)
            luaL_argerror(L, arg, lua_pushfstring(L, "option 'dtype' must be f32, f64, i32 or u64, got %s",
                                                  spk_lua_describe(L, -1)));
    }
    lua_pop(L, 1);
    return dtype;
}

spk_dtype spk_lua_optdtype(lua_State *L, int arg, spk_dtype fallback)
{
    if (lua_isnoneornil(L, arg))
        return fallback;
    if (lua_type(L, arg) != LUA_TSTRING)
        spk_lua_typeerror(L, arg, "dtype name");
    const char *name = lua_tostring(L, arg);
    spk_dtype dtype;
    if (spk_dtype_from_name(name, &dtype) != 0)
        luaL_argerror(L, arg, lua_pushfstring(L, "unknown dtype '%s' (expected f32, f64, i32 or u64)", name));
    return dtype;
}

static int64_t shape_entry(lua_State *L, int arg, int pos, int entry, bool allow_infer)
{
    int isint = 0;
    lua_Integer v = lua_type(L, pos) == LUA_TNUMBER ? lua_tointegerx(L, pos, &isint) : 0;
    if (!isint)
        luaL_argerror(L, arg, lua_pushfstring(L, "shape entry %d must be an integer, got %s", entry,
                                              spk_lua_describe(L, pos)));
    if (v < 0 && !(allow_infer && v == -1))
        luaL_argerror(L, arg, lua_pushfstring(L, "shape entry %d is negative (%I)", entry, v));
    return (int64_t)v;
}

/* A shape from the table at `arg`. */
static int read_shape_table(lua_State *L, int arg, int *ndim, int64_t *shape, bool allow_infer)
{
    lua_Integer len = (lua_Integer)lua_rawlen(L, arg);
    if (len > SPK_MAX_DIMS)
        luaL_argerror(L, arg, lua_pushfstring(L, "shape has %I dims, at most %d are supported", len, SPK_MAX_DIMS));
    lua_Integer entries = 0;
    lua_pushnil(L);
    while (lua_next(L, arg)) {
        lua_pop(L, 1);
        entries++;
    }
    if (entries != len)
        luaL_argerror(L, arg, "shape table must be a list of integers (it has other keys)");
    int n = 0;
    for (lua_Integer i = 1; i <= len; i++) {
        lua_rawgeti(L, arg, i);
        shape[n++] = shape_entry(L, arg, lua_gettop(L), (int)i, allow_infer);
        lua_pop(L, 1);
    }
    *ndim = n;
    return arg + 1;
}

int spk_lua_checkdim(lua_State *L, int arg, const spk_tensor *t)
{
    lua_Integer d = luaL_checkinteger(L, arg);
    if (t->ndim == 0)
        luaL_argerror(L, arg, "a 0-d tensor has no dims");
    if (d < 0)
        d += t->ndim + 1;
    if (d < 1 || d > t->ndim)
        luaL_argerror(L, arg, lua_pushfstring(L, "dim %I out of range 1..%d", luaL_checkinteger(L, arg), t->ndim));
    return (int)d - 1;
}

spk_scalar spk_lua_toscalar(lua_State *L, int idx)
{
    if (lua_isinteger(L, idx))
        return spk_scalar_int((int64_t)lua_tointeger(L, idx));
    return spk_scalar_float((double)lua_tonumber(L, idx));
}

int spk_lua_optreducedim(lua_State *L, int arg, const spk_tensor *t)
{
    if (lua_isnoneornil(L, arg))
        return SPK_ALL_DIMS;
    int isint = 0;
    if (lua_type(L, arg) == LUA_TNUMBER)
        lua_tointegerx(L, arg, &isint);
    if (!isint)
        luaL_argerror(L, arg, lua_pushfstring(L, "dim must be an integer, got %s", spk_lua_describe(L, arg)));
    return spk_lua_checkdim(L, arg, t);
}

bool spk_lua_optkeepdim(lua_State *L, int arg)
{
    if (lua_isnoneornil(L, arg))
        return false;
    if (lua_type(L, arg) != LUA_TBOOLEAN)
        luaL_argerror(L, arg, lua_pushfstring(L, "keepdim must be a boolean, got %s", spk_lua_describe(L, arg)));
    return lua_toboolean(L, arg);
}

int spk_lua_checkshape(lua_State *L, int arg, int *ndim, int64_t *shape, bool allow_infer)
{
    return spk_lua_readshape(L, arg, lua_gettop(L), ndim, shape, allow_infer);
}

int spk_lua_readshape(lua_State *L, int arg, int last, int *ndim, int64_t *shape, bool allow_infer)
{
    if (lua_type(L, arg) == LUA_TTABLE)
        return read_shape_table(L, arg, ndim, shape, allow_infer);
    int n = 0, a = arg;
    for (; a <= last && lua_type(L, a) == LUA_TNUMBER; a++) {
        if (n == SPK_MAX_DIMS)
            luaL_argerror(L, a, lua_pushfstring(L, "shape has more than %d dims", SPK_MAX_DIMS));
        shape[n] = shape_entry(L, a, a, n + 1, allow_infer);
        n++;
    }
    if (a == arg && !lua_isnoneornil(L, arg) && lua_type(L, arg) != LUA_TSTRING)
        spk_lua_typeerror(L, arg, "shape (table or integers)");
    *ndim = n;
    return a;
}

/* ---- tensors ----------------------------------------------------------------- */

static bool tensor_closed(lua_State *L, int idx)
{
    spk_lua_tensor *u = luaL_testudata(L, idx, SPK_TENSOR_MT);
    return u && !u->t;
}

const spk_lua_self spk_lua_tensor_self = {"tensor", tensor_closed};

spk_tensor *spk_lua_totensor(lua_State *L, int idx)
{
    spk_lua_tensor *u = luaL_testudata(L, idx, SPK_TENSOR_MT);
    return u ? u->t : NULL;
}

spk_tensor *spk_lua_checktensor(lua_State *L, int idx)
{
    spk_lua_tensor *u = luaL_testudata(L, idx, SPK_TENSOR_MT);
    if (!u)
        spk_lua_typeerror(L, idx, "tensor");
    if (!u->t)
        luaL_argerror(L, idx, "tensor is closed");
    return u->t;
}

void spk_lua_pushtensor(lua_State *L, spk_tensor *t)
{
    if (!t)
        spk_lua_fail(L);
    spk_lua_tensor *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->t = t;
    luaL_setmetatable(L, SPK_TENSOR_MT);
}

spk_tensor *spk_lua_holdtensor(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    spk_lua_checktensor(L, idx); /* its errors first */
    /* The slot exists before the tensor is read: making it may collect, and
     * a finalizer may close the tensor (then the check below says so). */
    spk_lua_tensor *u = lua_newuserdatauv(L, sizeof *u, 0);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, SPK_TENSOR_MT);
    lua_toclose(L, -1);
    const spk_tensor *t = spk_lua_checktensor(L, idx);
    spk_tensor *view = malloc(sizeof *view);
    if (!view)
        luaL_error(L, "out of memory");
    *view = *t;
    spk_storage_retain(view->storage);
    u->t = view;
    return view;
}

int spk_lua_checklayers(lua_State *L, int idx, spk_lstm_layer *out, int max, const char *where)
{
    const char *sep = where ? ": " : "";
    where = where ? where : "";
    if (lua_type(L, idx) != LUA_TTABLE)
        luaL_error(L, "%s%slayers must be a list of {W =, R =, B =}, got %s", where, sep, spk_lua_describe(L, idx));
    idx = lua_absindex(L, idx);
    int count = spk_lua_rawcount(L, idx);
    if (count < 1)
        luaL_error(L, "%s%slayers must hold 1..%d layers, got 0: a stack needs at least one layer {W =, R =, B =}",
                   where, sep, max);
    if (count > max)
        luaL_error(L, "%s%slayers must hold 1..%d layers, got %d", where, sep, max, count);
    static const char *const names[3] = {"W", "R", "B"};
    for (int k = 1; k <= count; k++) {
        if (lua_rawgeti(L, idx, k) != LUA_TTABLE)
            luaL_error(L, "layer %d is not a table {W =, R =, B =} (got %s)", k, spk_lua_typename(L, -1));
        const spk_tensor **parts[3] = {&out[k - 1].W, &out[k - 1].R, &out[k - 1].B};
        for (int i = 0; i < 3; i++) {
            spk_lua_rawfield(L, -1, names[i]);
            *parts[i] = NULL;
            if (!lua_isnil(L, -1) && !(*parts[i] = spk_lua_totensor(L, -1)))
                luaL_error(L, "layer %d: %s is not a tensor (got %s)", k, names[i], spk_lua_typename(L, -1));
            lua_pop(L, 1); /* the layers' list keeps the tensor alive */
        }
        lua_pop(L, 1);
    }
    return count;
}

static const char *const directions[] = {"forward", "reverse", NULL};

void spk_lua_read_trace(lua_State *L, int idx, spk_lstm_trace *trace, int64_t *steps)
{
    if (lua_type(L, idx) != LUA_TTABLE)
        luaL_error(L, "trace must be a table {layer =, direction =, steps =}, got %s", spk_lua_describe(L, idx));
    int t = lua_absindex(L, idx);
    static const char *const keys[] = {"layer", "direction", "steps", NULL};
    spk_lua_checkkeys(L, t, keys, "trace");
    int isint = 0;
    spk_lua_rawfield(L, t, "layer");
    lua_Integer layer = lua_tointegerx(L, -1, &isint);
    if (!isint)
        luaL_error(L, "trace.layer must be a layer number (from 1), got %s", spk_lua_describe(L, -1));
    spk_lua_rawfield(L, t, "direction");
    trace->direction = spk_lua_checkoption(L, -1, 0, directions, "trace.direction");
    if (spk_lua_rawfield(L, t, "steps") != LUA_TTABLE)
        luaL_error(L, "trace.steps must be a list of time positions (from 1), got %s", spk_lua_describe(L, -1));
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    if (n < 1 || n > SPK_LSTM_TRACE_MAX_STEPS)
        luaL_error(L, "trace.steps must list 1 to %d time positions, got %d", SPK_LSTM_TRACE_MAX_STEPS, (int)n);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        lua_Integer step = lua_tointegerx(L, -1, &isint);
        if (!isint)
            luaL_error(L, "trace.steps[%d] must be an integer, got %s", (int)i, spk_lua_describe(L, -1));
        steps[i - 1] = (int64_t)step - 1;
        lua_pop(L, 1);
    }
    lua_pop(L, 3);
    trace->layer = layer < INT32_MIN + 1 || layer > INT32_MAX ? -1 : (int)(layer - 1);
    trace->count = (int)n;
    trace->steps = steps;
}

void spk_lua_push_trace(lua_State *L, const spk_lstm_trace *trace, spk_tensor *h, spk_tensor *c)
{
    lua_createtable(L, 0, 5);
    spk_lua_pushtensor(L, h), lua_setfield(L, -2, "h");
    spk_lua_pushtensor(L, c), lua_setfield(L, -2, "c");
    lua_pushinteger(L, trace->layer + 1), lua_setfield(L, -2, "layer");
    lua_pushstring(L, directions[trace->direction ? 1 : 0]), lua_setfield(L, -2, "direction");
    lua_createtable(L, trace->count, 0);
    for (int e = 0; e < trace->count; e++) {
        lua_pushinteger(L, trace->steps[e] + 1);
        lua_rawseti(L, -2, e + 1);
    }
    lua_setfield(L, -2, "steps");
}

/* ---- failures ------------------------------------------------------------------ */

int spk_lua_fail(lua_State *L)
{
    const char *msg = spk_last_error();
    return luaL_error(L, "%s", *msg ? msg : "unknown error");
}

int spk_lua_check(lua_State *L, int status)
{
    if (status != 0)
        spk_lua_fail(L);
    return 0;
}

/* ---- documentation -------------------------------------------------------------
 * Two tables in the Lua registry, created on first use; keys are the
 * documented values themselves, so help(f) finds f's text whatever name f is
 * reached by. */

#define DOC_VALUES_KEY "spk.doc.values"
#define DOC_TYPES_KEY "spk.doc.types"

/* registry[key], made empty where missing; returns whether it existed. */
static int raw_subtable(lua_State *L, const char *key)
{
    if (spk_lua_rawfield(L, LUA_REGISTRYINDEX, key) == LUA_TTABLE)
        return 1;
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, key);
    return 0;
}

static void push_values(lua_State *L)
{
    if (raw_subtable(L, DOC_VALUES_KEY))
        return;
    /* Weak keys: a plan's per-instance closures leave with the plan. */
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
}

void spk_lua_setdoc(lua_State *L, int idx, const char *doc)
{
    idx = lua_absindex(L, idx);
    push_values(L);
    lua_pushvalue(L, idx);
    lua_pushstring(L, doc);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

void spk_lua_settype(lua_State *L, const char *type_name, int methods_idx, const char *doc)
{
    methods_idx = lua_absindex(L, methods_idx);
    raw_subtable(L, DOC_TYPES_KEY);
    lua_createtable(L, 0, 2);
    lua_pushvalue(L, methods_idx);
    lua_setfield(L, -2, "methods");
    lua_pushstring(L, doc);
    lua_setfield(L, -2, "doc");
    lua_setfield(L, -2, type_name);
    lua_pop(L, 1);
}

void spk_lua_push_doc_registry(lua_State *L)
{
    push_values(L);
    raw_subtable(L, DOC_TYPES_KEY);
}
