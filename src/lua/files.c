/* Lua bindings of tensor files: .npy (one tensor) and .safetensors (a table
 * name -> tensor). spk.load / spk.save choose the format from the extension;
 * the core's messages name the file and the problem. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "core/npy.h"
#include "core/safetensors.h"
#include "lua/tensor_area.h"

typedef enum { FILE_UNKNOWN, FILE_NPY, FILE_SAFETENSORS } file_kind;

static bool has_suffix(const char *path, const char *suffix)
{
    size_t n = strlen(path), m = strlen(suffix);
    return n >= m && strcasecmp(path + n - m, suffix) == 0;
}

static file_kind kind_of(const char *path)
{
    if (has_suffix(path, ".npy"))
        return FILE_NPY;
    if (has_suffix(path, ".safetensors"))
        return FILE_SAFETENSORS;
    return FILE_UNKNOWN;
}

/* Pushes a table name -> tensor, and a list of the names in file order. */
static int push_safetensors(lua_State *L, const char *path)
{
    spk_tensor_list list = {0};
    if (spk_safetensors_load(path, &list) != 0)
        return spk_lua_fail(L);
    lua_createtable(L, 0, (int)list.count);
    lua_createtable(L, (int)list.count, 0);
    for (size_t i = 0; i < list.count; i++) {
        lua_pushstring(L, list.items[i].name);
        lua_pushvalue(L, -1);
        lua_rawseti(L, -3, (lua_Integer)i + 1);
        spk_lua_pushtensor(L, list.items[i].tensor);
        list.items[i].tensor = NULL; /* now owned by the userdata */
        lua_rawset(L, -4);
    }
    spk_tensor_list_free(&list);
    return 2;
}

static int save_npy(lua_State *L, const char *path, int arg)
{
    spk_tensor *t = spk_lua_checktensor(L, arg);
    if (spk_npy_save(path, t) != 0)
        return spk_lua_fail(L);
    return 0;
}

/* Writes the table at `arg` (name -> tensor). The list borrows the names
 * and tensors, which the table keeps alive; its storage is a userdata, so an
 * argument error cannot leak it. */
static int save_safetensors(lua_State *L, const char *path, int arg)
{
    luaL_checktype(L, arg, LUA_TTABLE);
    size_t count = 0;
    lua_pushnil(L);
    while (lua_next(L, arg)) {
        lua_pop(L, 1);
        count++;
    }
    spk_named_tensor *items = lua_newuserdatauv(L, (count ? count : 1) * sizeof *items, 0);
    size_t n = 0;
    lua_pushnil(L);
    while (lua_next(L, arg)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            luaL_argerror(L, arg, lua_pushfstring(L, "tensor names must be strings, got a %s key",
                                                  luaL_typename(L, -2)));
        spk_lua_tensor *u = luaL_testudata(L, -1, SPK_TENSOR_MT);
        if (!u || !u->t)
            luaL_argerror(L, arg, lua_pushfstring(L, "entry '%s' is %s, expected an open tensor",
                                                  lua_tostring(L, -2), u ? "a closed tensor" : luaL_typename(L, -1)));
        size_t len;
        const char *name = lua_tolstring(L, -2, &len);
        if (strlen(name) != len)
            luaL_argerror(L, arg, lua_pushfstring(L, "tensor name '%s\\0%s' holds a NUL byte (a safetensors "
                                                     "name is JSON text; the name would be cut there)",
                                                  name, name + strlen(name) + 1));
        items[n].name = (char *)name;
        items[n].tensor = u->t;
        n++;
        lua_pop(L, 1);
    }
    spk_tensor_list list = {.count = n, .items = items};
    if (spk_safetensors_save(path, &list) != 0)
        return spk_lua_fail(L);
    lua_pop(L, 1);
    return 0;
}

static int unknown_kind(lua_State *L, const char *what, const char *path)
{
    return luaL_error(L, "%s: '%s': unknown file type (expected a .npy or .safetensors extension)", what, path);
}

/* spk.load(path): a tensor for .npy, a table name -> tensor (and the names in
 * file order) for .safetensors. */
static int module_load(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    switch (kind_of(path)) {
    case FILE_NPY:
        spk_lua_pushtensor(L, spk_npy_load(path));
        return 1;
    case FILE_SAFETENSORS:
        return push_safetensors(L, path);
    default:
        return unknown_kind(L, "load", path);
    }
}

/* spk.save(path, tensor) for .npy, spk.save(path, {name = tensor}) for
 * .safetensors. */
static int module_save(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    switch (kind_of(path)) {
    case FILE_NPY:
        if (lua_type(L, 2) == LUA_TTABLE)
            luaL_argerror(L, 2, "a .npy file holds one tensor; save a table to .safetensors");
        return save_npy(L, path, 2);
    case FILE_SAFETENSORS:
        if (luaL_testudata(L, 2, SPK_TENSOR_MT))
            luaL_argerror(L, 2, "a .safetensors file holds named tensors; pass a table {name = tensor}");
        return save_safetensors(L, path, 2);
    default:
        return unknown_kind(L, "save", path);
    }
}

static int module_load_safetensors(lua_State *L)
{
    return push_safetensors(L, luaL_checkstring(L, 1));
}

static int module_save_safetensors(lua_State *L)
{
    return save_safetensors(L, luaL_checkstring(L, 1), 2);
}

/* t:save(path): .npy only. */
static int tensor_save(lua_State *L)
{
    spk_lua_checktensor(L, 1);
    const char *path = luaL_checkstring(L, 2);
    if (kind_of(path) != FILE_NPY)
        luaL_argerror(L, 2, lua_pushfstring(L, "'%s': t:save writes .npy files; use spk.save_safetensors(path, "
                                               "{name = t}) for .safetensors", path));
    return save_npy(L, path, 1);
}

/* ---- spk.files: the reader every part of spk uses, for Lua --------------- */

#define READ_DEFAULT_MAX ((lua_Integer)64 << 20)

/* spk.files.read(path[, max_bytes]) -> the file's bytes: a regular file
 * (never blocks on a FIFO or device), at most max_bytes (default 64 MiB). */
static int files_read(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    lua_Integer max = luaL_optinteger(L, 2, READ_DEFAULT_MAX);
    luaL_argcheck(L, max >= 0, 2, "max_bytes must be >= 0");
    size_t len;
    char *text = spk_file_read(path, (size_t)max, NULL, &len);
    if (!text)
        return spk_lua_fail(L);
    lua_pushlstring(L, text, len);
    free(text);
    return 1;
}

/* spk.files.write(path, text) -> path: the writer every part of spk uses
 * (core/file.h): a temporary file beside the target, renamed over it once
 * whole; a folder, FIFO or device at path is refused at once. */
static int files_write(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    size_t len;
    const char *text = luaL_checklstring(L, 2, &len);
    if (spk_file_write(path, text, len) != 0)
        return spk_lua_fail(L);
    lua_settop(L, 1);
    return 1;
}

static bool not_dot_or_dotdot(const char *name) { return strcmp(name, ".") != 0 && strcmp(name, "..") != 0; }

/* spk.files.list(folder) -> the names in it (no "." or ".."), sorted. */
static int files_list(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    DIR *d = opendir(path); /* O_DIRECTORY: never blocks on a FIFO */
    if (!d)
        return luaL_error(L, "%s: cannot list the folder: %s", path, strerror(errno));
    spk_lua_push_folder_names(L, d, not_dot_or_dotdot);
    return 1;
}

/* spk.files.kind(path) -> "file" | "folder" | "fifo" | "socket" |
 * "character device" | "block device", following links; nil and a message
 * naming the path where there is nothing to stat. Never opens the path. */
static int files_kind(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    struct stat st;
    if (stat(path, &st) != 0) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: %s", path, strerror(errno));
        return 2;
    }
    lua_pushstring(L, S_ISREG(st.st_mode)    ? "file"
                      : S_ISDIR(st.st_mode)  ? "folder"
                      : S_ISFIFO(st.st_mode) ? "fifo"
                      : S_ISSOCK(st.st_mode) ? "socket"
                      : S_ISCHR(st.st_mode)  ? "character device"
                      : S_ISBLK(st.st_mode)  ? "block device"
                                             : "other");
    return 1;
}

/* spk.files.real_path(path) -> the absolute path with every link and "."
 * or ".." resolved; nil and a message naming path where it cannot be (a
 * dangling link, a loop of links, nothing there). */
static int files_real_path(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    char *real = realpath(path, NULL);
    if (!real) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: %s", path, strerror(errno));
        return 2;
    }
    lua_pushstring(L, real);
    free(real);
    return 1;
}

/* A removal's result for Lua: true, or nil and the message. */
static int push_removed(lua_State *L, int rc)
{
    if (rc != 0) {
        lua_pushnil(L);
        lua_pushstring(L, spk_last_error());
        return 2;
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* spk.files.remove(path) -> true | nil, message */
static int files_remove(lua_State *L) { return push_removed(L, spk_file_remove(luaL_checkstring(L, 1))); }

/* spk.files.make_folder(path) -> path, made: the folder and every missing
 * one above it (core/file.h); made: whether path itself was made now. */
static int files_make_folder(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    bool made = false;
    if (spk_folder_make(path, 0777, &made) != 0)
        return spk_lua_fail(L);
    lua_settop(L, 1);
    lua_pushboolean(L, made);
    return 2;
}

/* spk.files.remove_folder(path) -> true | nil, message: an empty folder only. */
static int files_remove_folder(lua_State *L)
{
    return push_removed(L, spk_folder_remove_empty(luaL_checkstring(L, 1)));
}

/* spk.files.is_link(path) -> whether path itself is a symbolic link. */
static int files_is_link(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    struct stat st;
    lua_pushboolean(L, lstat(path, &st) == 0 && S_ISLNK(st.st_mode));
    return 1;
}

static const spk_lua_checked_reg files_functions[] = {
    {"read", files_read,
     "spk.files.read(path[, max_bytes = 64 MiB]) -> string\n"
     "The bytes of a regular file, read without blocking (a FIFO or a device is an error naming it) and\n"
     "refused past max_bytes: the reader every part of spk uses.",
     "path, max_bytes"},
    {"write", files_write,
     "spk.files.write(path, text) -> path\n"
     "Writes text as the file at path, whole or not at all: into a temporary file beside it, renamed over it\n"
     "once every byte is on the disk (a failed write leaves the previous file as it was). A folder, FIFO or\n"
     "device at path is refused at once; a link is followed. The writer every part of spk uses.",
     "path, text"},
    {"list", files_list, "spk.files.list(folder) -> {name, ...}\nThe names in a folder (no . or ..), sorted.", "folder"},
    {"real_path", files_real_path,
     "spk.files.real_path(path) -> absolute path | nil, message\n"
     "path with every symbolic link, \".\" and \"..\" resolved (nil for a dangling link or a loop).",
     "path"},
    {"remove", files_remove,
     "spk.files.remove(path) -> true | nil, message\n"
     "Removes the file at path (a regular file or a link; a folder, FIFO or device is refused): how spk takes\n"
     "back what it wrote, as a failed experiment does.",
     "path"},
    {"make_folder", files_make_folder,
     "spk.files.make_folder(path) -> path, made\n"
     "Makes the folder at path and every missing folder above it (an existing folder is fine; a file in the\n"
     "way is an error naming it); made says whether path itself was made by this call.",
     "path"},
    {"remove_folder", files_remove_folder,
     "spk.files.remove_folder(path) -> true | nil, message\n"
     "Removes the empty folder at path (anything else is refused, naming what it is): how spk takes back a\n"
     "folder it made for a run that wrote nothing into it.",
     "path"},
    {"is_link", files_is_link, "spk.files.is_link(path) -> boolean\nWhether path itself is a symbolic link.", "path"},
    {"kind", files_kind,
     "spk.files.kind(path) -> \"file\" | \"folder\" | \"fifo\" | \"socket\" | ... | nil, message\n"
     "What is at path (links followed), without opening it.",
     "path"},
    {NULL, NULL, NULL, NULL},
};

static const spk_lua_checked_reg module_functions[] = {
    {"load", module_load,
     "spk.load(path) -> tensor | tensors, names\n"
     "A .npy file (versions 1.0-3.0, Fortran order read) as a host tensor; a .safetensors file as a table\n"
     "name -> tensor and the list of names in file order. Bad files are errors naming the file.",
     "path"},
    {"save", module_save,
     "spk.save(path, tensor | {name = tensor, ...})\n"
     "Writes a .npy file (one tensor) or a .safetensors file (named tensors), chosen by the extension.",
     "path, tensors"},
    {"load_safetensors", module_load_safetensors,
     "spk.load_safetensors(path) -> tensors, names\nA .safetensors file as name -> tensor, and the names in file order.",
     "path"},
    {"save_safetensors", module_save_safetensors,
     "spk.save_safetensors(path, {name = tensor, ...})\nWrites named tensors to a .safetensors file (sorted by name).",
     "path, tensors"},
    {NULL, NULL, NULL, NULL},
};

static const spk_lua_checked_reg tensor_file_methods[] = {
    {"save", tensor_save, "t:save(path)\nWrites t to a .npy file (spk.save_safetensors writes named tensors).", "path"},
    {NULL, NULL, NULL, NULL},
};

void spk_open_files(lua_State *L, int module)
{
    lua_pushvalue(L, module);
    spk_lua_setfuncs_checked(L, module_functions, NULL);
    lua_newtable(L);
    spk_lua_setfuncs_module(L, files_functions, "spk.files");
    lua_setfield(L, -2, "files");
    lua_pop(L, 1);
    spk_lua_push_tensor_methods(L);
    spk_lua_setfuncs_checked(L, tensor_file_methods, &spk_lua_tensor_self);
    lua_pop(L, 1);
}
