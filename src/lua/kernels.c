/* Lua bindings of NVRTC compiles and kernel launches (src/cuda/runtime.h):
 * spk.core.cuda's compile, the userdata types module, kernel and scalar, the
 * typed scalars spk.u32 ... and the kernel cache and folder. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "cuda/ptx.h"
#include "lua/cuda_area.h"

#define SCALAR_MT "spk.cuda.scalar"

static spk_lua_type kernel_type; /* below */

/* ---- compile ----------------------------------------------------------- */

static int compare_names(const void *a, const void *b)
{
    return strcmp(((const spk_define *)a)->name, ((const spk_define *)b)->name);
}

static int l_compile(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    static const char *const known[] = {"source", "file", "defines", "options", "arch", "cache", NULL};
    spk_lua_checkkeys(L, 1, known, "compile");
    /* Every string used is kept alive on the stack (source, file, arch at 2, 3, 4)
     * or in the holder table at 5, whatever happens to the caller's tables. */
    lua_settop(L, 1);
    spk_compile_options o = {0};
    o.source = spk_lua_stringfield(L, 1, "source", "compile");
    o.file = spk_lua_stringfield(L, 1, "file", "compile");
    o.arch = spk_lua_stringfield(L, 1, "arch", "compile");
    if (!o.source == !o.file)
        return luaL_error(L, "compile: give exactly one of source = and file =");
    spk_lua_rawfield(L, 1, "cache");
    o.no_cache = !lua_isnil(L, -1) && !lua_toboolean(L, -1);
    lua_pop(L, 1);

    lua_newtable(L);
    int holder = 5, held = 0;
    spk_lua_rawfield(L, 1, "defines");
    int nd = 0;
    if (!lua_isnil(L, -1)) {
        luaL_checktype(L, -1, LUA_TTABLE);
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            nd++;
            lua_pop(L, 1);
        }
    }
    spk_define *defs = lua_newuserdatauv(L, (size_t)(nd ? nd : 1) * sizeof *defs, 0);
    lua_rawseti(L, holder, ++held);
    int i = 0;
    if (nd) {
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            if (lua_type(L, -2) != LUA_TSTRING)
                return luaL_error(L, "compile: defines must map names to values");
            defs[i].name = lua_tostring(L, -2);
            lua_pushvalue(L, -2);
            lua_rawseti(L, holder, ++held);
            if (lua_type(L, -1) == LUA_TBOOLEAN) {
                if (!lua_toboolean(L, -1)) { /* NAME = false: not defined */
                    lua_pop(L, 1);
                    continue;
                }
                defs[i].value = NULL;
            } else if (lua_type(L, -1) == LUA_TNUMBER || lua_type(L, -1) == LUA_TSTRING) {
                lua_pushvalue(L, -1);
                defs[i].value = lua_tostring(L, -1); /* numbers become text */
                lua_rawseti(L, holder, ++held);
            } else {
                return luaL_error(L, "compile: define %s must be a string, number or boolean", defs[i].name);
            }
            i++;
            lua_pop(L, 1);
        }
        qsort(defs, (size_t)i, sizeof *defs, compare_names); /* same key whatever the table order */
    }
    o.defines = defs;
    o.ndefines = i;
    lua_pop(L, 1);

    spk_lua_rawfield(L, 1, "options");
    int no = lua_isnil(L, -1) ? 0 : (luaL_checktype(L, -1, LUA_TTABLE), spk_lua_rawcount(L, -1));
    const char **opts = lua_newuserdatauv(L, (size_t)(no ? no : 1) * sizeof *opts, 0);
    lua_rawseti(L, holder, ++held);
    for (int j = 0; j < no; j++) {
        lua_rawgeti(L, -1, j + 1);
        if (lua_type(L, -1) != LUA_TSTRING || strlen(lua_tostring(L, -1)) != lua_rawlen(L, -1))
            return luaL_error(L, "compile: options[%d] must be a string without a NUL byte", j + 1);
        opts[j] = lua_tostring(L, -1);
        lua_rawseti(L, holder, ++held);
    }
    o.options = opts;
    o.noptions = no;

    spk_module *m = spk_compile(&o);
    if (!m)
        return spk_lua_fail(L);
    *spk_lua_newobject(L, &spk_lua_module_type) = m;
    return 1;
}

/* ---- modules ----------------------------------------------------------- */

static spk_module *self_module(lua_State *L) { return spk_lua_checkobject(L, 1, &spk_lua_module_type); }

static int module_code(lua_State *L)
{
    spk_module *m = self_module(L);
    size_t bytes;
    const char *code = spk_module_code(m, &bytes);
    /* PTX carries its terminating NUL; Lua strings need not. */
    if (spk_module_is_ptx(m) && bytes && code[bytes - 1] == '\0')
        bytes--;
    lua_pushlstring(L, code, bytes);
    lua_pushinteger(L, (lua_Integer)bytes);
    return 2;
}

static int module_kernel(lua_State *L)
{
    const char *name = luaL_checkstring(L, 2); /* a number made a string allocates: the module is taken after */
    void **slot = spk_lua_newobject(L, &kernel_type);
    if (!(*slot = spk_module_kernel(self_module(L), name)))
        return spk_lua_fail(L);
    return 1;
}

/* m:params(name): the parameters of a kernel of a PTX module, read from the
 * PTX (no device needed). */
static int module_params(lua_State *L)
{
    const char *name = luaL_checkstring(L, 2);
    spk_ptx_param *params = lua_newuserdatauv(L, sizeof *params * SPK_PTX_MAX_PARAMS, 0);
    spk_module *m = self_module(L); /* after the allocation */
    if (!spk_module_is_ptx(m))
        return luaL_error(L, "m:params: the module is a %s cubin; compile with arch = \"compute_XY\" for its PTX",
                          spk_module_arch(m));
    size_t bytes;
    const char *code = spk_module_code(m, &bytes);
    int n = 0;
    spk_lua_check(L, spk_ptx_entry_params(code, bytes, name, params, SPK_PTX_MAX_PARAMS, &n));
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_createtable(L, 0, 4);
        spk_lua_setstring(L, "type", params[i].type);
        spk_lua_setint(L, "size", (lua_Integer)params[i].size);
        spk_lua_setint(L, "elements", params[i].elements);
        spk_lua_setstring(L, "name", params[i].name);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* __index: the fields below, else the methods. */
static int module_index(lua_State *L)
{
    spk_module *m = spk_lua_checkobject(L, 1, &spk_lua_module_type);
    if (lua_type(L, 2) != LUA_TSTRING)
        return 0;
    const char *key = lua_tostring(L, 2);
    size_t bytes;
    if (strcmp(key, "ptx") == 0) {
        if (!spk_module_is_ptx(m))
            return 0;
        lua_settop(L, 1);
        module_code(L);
        lua_pop(L, 1);
    } else if (strcmp(key, "arch") == 0) {
        lua_pushstring(L, spk_module_arch(m));
    } else if (strcmp(key, "key") == 0) {
        lua_pushstring(L, spk_module_key(m));
    } else if (strcmp(key, "log") == 0) {
        lua_pushstring(L, spk_module_log(m));
    } else if (strcmp(key, "cached") == 0) {
        lua_pushboolean(L, spk_module_from_cache(m));
    } else if (strcmp(key, "size") == 0) {
        spk_module_code(m, &bytes);
        lua_pushinteger(L, (lua_Integer)bytes);
    } else if (strcmp(key, "format") == 0) {
        lua_pushstring(L, spk_module_is_ptx(m) ? "ptx" : "cubin");
    } else {
        spk_lua_push_methods(L, spk_lua_module_type.metatable);
        spk_lua_rawfield(L, -1, key);
    }
    return 1;
}

static void module_tostring(lua_State *L, void *m)
{
    size_t bytes;
    spk_module_code(m, &bytes);
    lua_pushfstring(L, "spk.cuda.module (%s, %s, %d bytes%s)", spk_module_arch(m), spk_module_is_ptx(m) ? "ptx" : "cubin",
                    (int)bytes, spk_module_from_cache(m) ? ", cached" : "");
}

static const spk_lua_checked_reg module_methods[] = {
    {"kernel", module_kernel, "m:kernel(name) -> kernel\nThe __global__ function `name` of the compiled module.", "name"},
    {"code", module_code, "m:code() -> text, bytes\nThe module's PTX text or cubin bytes, and its size.", ""},
    {"params", module_params,
     "m:params(name) -> {{type =, size =, elements =, name =}, ...}\n"
     "The parameters of kernel `name` of a PTX module (arch = \"compute_XY\"), read from the PTX: no device\n"
     "needed. type is the PTX type (\"u64\": a pointer or 64-bit integer, \"u32\", \"f32\", \"b8\" arrays: structs).",
     "name"},
    {NULL, NULL, NULL, NULL}};

static void module_free(void *m) { spk_module_release(m); }

spk_lua_type spk_lua_module_type = {.metatable = "spk.cuda.module", .name = "module",
    .methods = module_methods, .free = module_free, .tostring = module_tostring,
    .closed = "spk.cuda.module (closed)", .index = module_index,
    .doc = "module: NVRTC-compiled code (spk.cuda.compile{...}); fields arch, format (\"cubin\" | \"ptx\"),\n"
           "size, key (the cache key), log (the compiler's), cached (loaded from the kernel cache), ptx.",
};

/* ---- the kernel cache and folder ------------------------------------------ */

static int l_cache_info(lua_State *L)
{
    spk_cache_info info;
    spk_lua_check(L, spk_cache_get_info(&info));
    lua_createtable(L, 0, 7);
    spk_lua_setstring(L, "dir", info.dir);
    spk_lua_setbool(L, "writable", info.writable);
    spk_lua_setint(L, "entries", info.entries);
    spk_lua_setint(L, "bytes", (lua_Integer)info.bytes);
    spk_lua_setint(L, "hits", info.hits);
    spk_lua_setint(L, "misses", info.misses);
    spk_lua_setint(L, "rejected", info.rejected);
    return 1;
}

static int l_cache_clear(lua_State *L)
{
    spk_lua_check(L, spk_cache_clear());
    return 0;
}

/* spk.cuda.set_cache_dir(dir | nil): a folder for this session's cache
 * (nil: back to $SPK_CACHE_DIR or the per-user default). Resets counters. */
static int l_set_cache_dir(lua_State *L)
{
    spk_cache_set_dir(luaL_optstring(L, 1, NULL));
    return 0;
}

static int l_set_kernel_dir(lua_State *L)
{
    const char *dir = luaL_checkstring(L, 1);
    struct stat st;
    bool ok = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
    if (ok)
        spk_set_kernel_dir(dir);
    lua_pushboolean(L, ok);
    return 1;
}

static int l_kernel_dir(lua_State *L)
{
    const char *dir = spk_kernel_dir();
    if (!dir)
        return luaL_error(L, "spk.cuda.kernel_dir: %s", spk_last_error());
    lua_pushstring(L, dir);
    return 1;
}

/* spk.cuda.sha256(text) -> 64 hex digits (the hash the kernel cache uses). */
static int l_sha256(lua_State *L)
{
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    uint8_t digest[32];
    spk_sha256(text, len, digest);
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    lua_pushlstring(L, hex, 64);
    return 1;
}

/* A *.cu or *.cuh file that is not hidden. */
static bool is_kernel_source(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' &&
           ((n > 3 && strcmp(name + n - 3, ".cu") == 0) || (n > 4 && strcmp(name + n - 4, ".cuh") == 0));
}

/* spk.cuda.kernel_files([dir]) -> sorted names of the *.cu and *.cuh files in
 * dir (default: the kernel folder), so a script can hash the kernel sources. */
static int l_kernel_files(lua_State *L)
{
    const char *dir = lua_isnoneornil(L, 1) ? spk_kernel_dir() : luaL_checkstring(L, 1);
    if (!dir)
        return luaL_error(L, "spk.cuda.kernel_files: %s", spk_last_error());
    DIR *d = opendir(dir);
    if (!d)
        return luaL_error(L, "spk.cuda.kernel_files: cannot read the folder %s", dir);
    spk_lua_push_folder_names(L, d, is_kernel_source);
    return 1;
}

/* ---- scalars and arguments --------------------------------------------- */

static int make_scalar(lua_State *L, spk_arg_kind kind)
{
    spk_arg a = {.kind = kind};
    switch (kind) {
    case SPK_ARG_F32:
        a.v.f32 = (float)luaL_checknumber(L, 1);
        break;
    case SPK_ARG_F64:
        a.v.f64 = luaL_checknumber(L, 1);
        break;
    default: {
        lua_Integer n = luaL_checkinteger(L, 1);
        if (kind == SPK_ARG_U32 && (n < 0 || n > 0xffffffffLL))
            return luaL_argerror(L, 1, "u32 out of range [0, 4294967295]");
        if (kind == SPK_ARG_I32 && (n < -2147483648LL || n > 2147483647LL))
            return luaL_argerror(L, 1, "i32 out of range");
        if (kind == SPK_ARG_U64 && n < 0)
            return luaL_argerror(L, 1, "u64 must not be negative");
        if (kind == SPK_ARG_U32)
            a.v.u32 = (uint32_t)n;
        else if (kind == SPK_ARG_I32)
            a.v.i32 = (int32_t)n;
        else if (kind == SPK_ARG_U64)
            a.v.u64 = (uint64_t)n;
        else
            a.v.i64 = (int64_t)n;
    }
    }
    spk_arg *u = lua_newuserdatauv(L, sizeof *u, 0);
    *u = a;
    luaL_setmetatable(L, SCALAR_MT);
    return 1;
}

/* spk.u32(n), spk.i32(n), ...: one constructor a kind. */
#define SCALAR_CONSTRUCTOR(kind, KIND) static int l_##kind(lua_State *L) { return make_scalar(L, SPK_ARG_##KIND); }
SCALAR_CONSTRUCTOR(u32, U32) SCALAR_CONSTRUCTOR(i32, I32) SCALAR_CONSTRUCTOR(u64, U64)
SCALAR_CONSTRUCTOR(i64, I64) SCALAR_CONSTRUCTOR(f32, F32) SCALAR_CONSTRUCTOR(f64, F64)
#undef SCALAR_CONSTRUCTOR

static int scalar_tostring(lua_State *L)
{
    spk_arg *a = luaL_checkudata(L, 1, SCALAR_MT);
    switch (a->kind) {
    case SPK_ARG_U32: lua_pushfstring(L, "spk.u32(%I)", (lua_Integer)a->v.u32); break;
    case SPK_ARG_I32: lua_pushfstring(L, "spk.i32(%I)", (lua_Integer)a->v.i32); break;
    case SPK_ARG_U64: lua_pushfstring(L, "spk.u64(%I)", (lua_Integer)a->v.u64); break;
    case SPK_ARG_I64: lua_pushfstring(L, "spk.i64(%I)", (lua_Integer)a->v.i64); break;
    case SPK_ARG_F32: lua_pushfstring(L, "spk.f32(%f)", (lua_Number)a->v.f32); break;
    case SPK_ARG_F64: lua_pushfstring(L, "spk.f64(%f)", (lua_Number)a->v.f64); break;
    default: lua_pushstring(L, "spk.cuda.scalar"); break;
    }
    return 1;
}

static int scalar_index(lua_State *L)
{
    spk_arg *a = luaL_checkudata(L, 1, SCALAR_MT);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "kind") == 0)
        lua_pushstring(L, spk_arg_kind_name(a->kind));
    else if (strcmp(key, "size") == 0)
        lua_pushinteger(L, (lua_Integer)spk_arg_size(a->kind));
    else if (strcmp(key, "value") == 0) {
        switch (a->kind) {
        case SPK_ARG_U32: lua_pushinteger(L, a->v.u32); break;
        case SPK_ARG_I32: lua_pushinteger(L, a->v.i32); break;
        case SPK_ARG_U64: lua_pushinteger(L, (lua_Integer)a->v.u64); break;
        case SPK_ARG_I64: lua_pushinteger(L, a->v.i64); break;
        case SPK_ARG_F32: lua_pushnumber(L, a->v.f32); break;
        case SPK_ARG_F64: lua_pushnumber(L, a->v.f64); break;
        default: lua_pushnil(L);
        }
    } else
        lua_pushnil(L);
    return 1;
}

/* Converts the array at idx into args (and the device storages they use).
 * Returns the count; errors name the argument. */
static int read_args(lua_State *L, int idx, const char *kernel, spk_arg *args, spk_storage **uses)
{
    if (lua_isnil(L, idx))
        return 0;
    if (!lua_istable(L, idx))
        return luaL_error(L, "kernel %s: args must be a table", kernel);
    int n = spk_lua_rawcount(L, idx);
    if (n > SPK_MAX_KERNEL_ARGS)
        return luaL_error(L, "kernel %s: %d arguments is more than the %d supported", kernel, n, SPK_MAX_KERNEL_ARGS);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, idx, i + 1);
        spk_arg *scalar = luaL_testudata(L, -1, SCALAR_MT);
        spk_tensor *t = scalar ? NULL : spk_lua_totensor(L, -1);
        uses[i] = NULL;
        if (scalar) {
            args[i] = *scalar;
        } else if (t) {
            if (!spk_tensor_is_device(t))
                return luaL_error(L, "kernel %s: argument %d is a host tensor; move it to the GPU with :cuda()",
                                  kernel, i + 1);
            args[i].kind = SPK_ARG_PTR;
            args[i].v.ptr = spk_tensor_data(t);
            uses[i] = t->storage;
        } else if (lua_type(L, -1) == LUA_TNUMBER) {
            return luaL_error(L, "kernel %s: argument %d is a plain number; give its type: spk.u32(n), spk.i32(n), "
                              "spk.u64(n), spk.f32(x) or spk.f64(x)", kernel, i + 1);
        } else {
            return luaL_error(L, "kernel %s: argument %d is a %s; expected a device tensor or a typed scalar",
                              kernel, i + 1, luaL_typename(L, -1));
        }
        lua_pop(L, 1);
    }
    return n;
}

/* spk.cuda.pack_args(param_sizes, args) -> {{kind=, size=}, ...}: the check a
 * launch makes, without a GPU (so it can be tested anywhere). */
static int l_pack_args(lua_State *L)
{
    int64_t given[SPK_MAX_KERNEL_ARGS];
    int np = spk_lua_checkintegers(L, 1, given, 0, SPK_MAX_KERNEL_ARGS, "param_sizes");
    size_t sizes[SPK_MAX_KERNEL_ARGS];
    for (int i = 0; i < np; i++)
        sizes[i] = given[i] < 0 ? 0 : (size_t)given[i];
    spk_arg args[SPK_MAX_KERNEL_ARGS];
    spk_storage *uses[SPK_MAX_KERNEL_ARGS];
    const char *name = luaL_optstring(L, 3, "?");
    int n = read_args(L, 2, name, args, uses);
    void *packed[SPK_MAX_KERNEL_ARGS];
    spk_lua_check(L, spk_pack_args(name, args, n, sizes, np, packed));
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_createtable(L, 0, 2);
        spk_lua_setstring(L, "kind", spk_arg_kind_name(args[i].kind));
        spk_lua_setint(L, "size", (lua_Integer)spk_arg_size(args[i].kind));
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* ---- kernels ----------------------------------------------------------- */

static size_t opt_size_field(lua_State *L, int idx, const char *key)
{
    spk_lua_rawfield(L, idx, key);
    lua_Integer v = lua_isnil(L, -1) ? 0 : luaL_checkinteger(L, -1);
    if (v < 0)
        luaL_error(L, "%s must not be negative", key);
    lua_pop(L, 1);
    return (size_t)v;
}

static int kernel_launch(lua_State *L)
{
    spk_kernel *k = spk_lua_checkobject(L, 1, &kernel_type);
    luaL_checktype(L, 2, LUA_TTABLE);
    static const char *const known[] = {"grid", "block", "cluster", "smem", "stream", "cooperative", "args", NULL};
    spk_lua_checkkeys(L, 2, known, "launch"); /* the raw readers below make no allocation, so k stays valid */
    spk_launch_config cfg = {0};
    spk_lua_dim3field(L, 2, "grid", cfg.grid, 0, "launch");
    spk_lua_dim3field(L, 2, "block", cfg.block, 0, "launch");
    if (!cfg.grid[0] || !cfg.block[0])
        return luaL_error(L, "kernel %s: launch needs grid = and block =", spk_kernel_name(k));
    spk_lua_dim3field(L, 2, "cluster", cfg.cluster, 0, "launch");
    cfg.smem = opt_size_field(L, 2, "smem");
    cfg.stream = spk_lua_fieldstream(L, 2, "stream", NULL);
    spk_lua_rawfield(L, 2, "cooperative");
    cfg.cooperative = lua_toboolean(L, -1);
    lua_pop(L, 1);
    spk_arg args[SPK_MAX_KERNEL_ARGS];
    spk_storage *uses[SPK_MAX_KERNEL_ARGS], *compact[SPK_MAX_KERNEL_ARGS];
    spk_lua_rawfield(L, 2, "args");
    int n = read_args(L, lua_gettop(L), spk_kernel_name(k), args, uses);
    lua_pop(L, 1);
    int nuses = 0;
    for (int i = 0; i < n; i++)
        if (uses[i])
            compact[nuses++] = uses[i];
    cfg.uses = compact;
    cfg.nuses = nuses;
    spk_lua_check(L, spk_kernel_launch(k, &cfg, args, n));
    return 0;
}

static int kernel_attributes(lua_State *L)
{
    spk_kernel_attrs a;
    spk_lua_check(L, spk_kernel_attributes(spk_lua_checkobject(L, 1, &kernel_type), &a));
    lua_createtable(L, 0, 8);
#define SETI(key, v) (lua_pushinteger(L, (lua_Integer)(v)), lua_setfield(L, -2, key))
    SETI("registers", a.registers);
    SETI("local_bytes", a.local_bytes);
    SETI("static_smem", a.static_smem);
    SETI("const_bytes", a.const_bytes);
    SETI("max_threads", a.max_threads);
    SETI("max_dynamic_smem", a.max_dynamic_smem);
    SETI("ptx_version", a.ptx_version);
    SETI("binary_version", a.binary_version);
#undef SETI
    return 1;
}

static void read_block_smem(lua_State *L, int *block, size_t *smem)
{
    luaL_checktype(L, 2, LUA_TTABLE);
    static const char *const known[] = {"block", "smem", NULL};
    spk_lua_checkkeys(L, 2, known, "occupancy");
    unsigned dims[3];
    spk_lua_dim3field(L, 2, "block", dims, 0, "occupancy");
    if (!dims[0])
        luaL_error(L, "block = is required");
    *block = (int)(dims[0] * dims[1] * dims[2]);
    *smem = opt_size_field(L, 2, "smem");
}

/* k:<method>{block =, smem =} -> count(k, threads, smem): blocks an SM, or co-resident ones. */
static int count_blocks(lua_State *L, int (*count)(spk_kernel *, int, size_t, int *))
{
    int block, blocks;
    size_t smem;
    read_block_smem(L, &block, &smem);
    spk_lua_check(L, count(spk_lua_checkobject(L, 1, &kernel_type), block, smem, &blocks));
    lua_pushinteger(L, blocks);
    return 1;
}

static int kernel_occupancy(lua_State *L) { return count_blocks(L, spk_kernel_occupancy); }
static int kernel_capacity(lua_State *L) { return count_blocks(L, spk_kernel_cooperative_capacity); }

static int kernel_params(lua_State *L)
{
    spk_kernel *k = spk_lua_checkobject(L, 1, &kernel_type);
    int n;
    size_t sizes[SPK_MAX_KERNEL_ARGS];
    spk_lua_check(L, spk_kernel_params(k, &n, sizes, SPK_MAX_KERNEL_ARGS));
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)sizes[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int kernel_set_max_smem(lua_State *L)
{
    spk_lua_check(L, spk_kernel_set_max_dynamic_smem(spk_lua_checkobject(L, 1, &kernel_type),
                                                (size_t)luaL_checkinteger(L, 2)));
    return 0;
}

static int kernel_index(lua_State *L)
{
    spk_kernel *k = spk_lua_checkobject(L, 1, &kernel_type);
    if (lua_type(L, 2) != LUA_TSTRING)
        return 0;
    const char *key = lua_tostring(L, 2);
    if (strcmp(key, "name") == 0) {
        lua_pushstring(L, spk_kernel_name(k));
        return 1;
    }
    spk_lua_push_methods(L, kernel_type.metatable);
    spk_lua_rawfield(L, -1, key);
    return 1;
}

static void kernel_tostring(lua_State *L, void *k) { lua_pushfstring(L, "spk.cuda.kernel (%s)", spk_kernel_name(k)); }

static const spk_lua_checked_reg kernel_methods[] = {
    {"launch", kernel_launch,
     "k:launch{grid =, block =, args = {...}, smem = 0, stream =, cooperative = false, cluster =}\n"
     "Enqueues the kernel. grid, block and cluster are a number or {x, y, z}; args are device tensors and\n"
     "typed scalars (spk.u32(n), spk.f32(x), ...), checked in count and size against the kernel's\n"
     "parameters before launch.", "options"},
    {"attributes", kernel_attributes,
     "k:attributes() -> {registers, local_bytes, static_smem, const_bytes, max_threads, max_dynamic_smem,\n"
     "                   ptx_version, binary_version}", ""},
    {"occupancy", kernel_occupancy,
     "k:occupancy{block =, smem = 0} -> integer\nResident blocks per SM at that block size and dynamic shared memory.", "options"},
    {"cooperative_capacity", kernel_capacity,
     "k:cooperative_capacity{block =, smem = 0} -> integer\nThe most blocks a cooperative launch may have on this device.", "options"},
    {"params", kernel_params, "k:params() -> {bytes, ...}\nThe size of each kernel parameter, in order.", ""},
    {"set_max_dynamic_smem", kernel_set_max_smem,
     "k:set_max_dynamic_smem(bytes)\nAllows launches with up to `bytes` of dynamic shared memory.", "bytes"},
    {NULL, NULL, NULL, NULL}};

static void kernel_free(void *k) { spk_kernel_free(k); }

static spk_lua_type kernel_type = {.metatable = "spk.cuda.kernel", .name = "kernel",
    .methods = kernel_methods, .free = kernel_free, .tostring = kernel_tostring,
    .closed = "spk.cuda.kernel (closed)", .index = kernel_index,
    .doc = "kernel: a __global__ function of a module (m:kernel(name)); field name.",
};

/* A scalar holds its value in the userdata (not a pointer): its __tostring is its own. */
static const luaL_Reg scalar_metamethods[] = {{"__tostring", scalar_tostring}, {NULL, NULL}};

static spk_lua_type scalar_type = {.metatable = SCALAR_MT, .name = "scalar",
    .index = scalar_index,
    .doc = "scalar: a typed kernel argument (spk.u32(n), spk.f32(x), ...); fields kind, size, value.",
};

static const spk_lua_checked_reg functions[] = {
    {"compile", l_compile,
     "spk.cuda.compile{source = text | file = path, defines = {NAME = value}, options = {...}, arch =,\n"
     "                 cache = true} -> module\n"
     "Compiles CUDA C++ with NVRTC (arch: the current device's, e.g. \"sm_90\"); #include finds the\n"
     "kernels folder. Results are cached on disk by SHA-256 of source, includes, defines, options, arch\n"
     "and NVRTC version. A compile error is raised with the compiler's log.", "options"},
    {"cache_info", l_cache_info,
     "spk.cuda.cache_info() -> {dir, writable, entries, bytes, hits, misses, rejected}\n"
     "The kernel cache's folder, its entries and this session's counters.", ""},
    {"cache_clear", l_cache_clear, "spk.cuda.cache_clear()\nDeletes the kernel cache's entries.", ""},
    {"set_cache_dir", l_set_cache_dir,
     "spk.cuda.set_cache_dir(dir | nil)\n"
     "The kernel cache's folder for this session (nil: $SPK_CACHE_DIR or the per-user default); resets counters.", "dir"},
    {"set_kernel_dir", l_set_kernel_dir,
     "spk.cuda.set_kernel_dir(dir) -> boolean\nThe folder #include searches for kernel headers; false if dir is no folder.", "dir"},
    {"kernel_dir", l_kernel_dir, "spk.cuda.kernel_dir() -> path\nThe kernel folder in use.", ""},
    {"kernel_files", l_kernel_files,
     "spk.cuda.kernel_files([dir = kernel_dir()]) -> {name, ...}\nThe sorted *.cu and *.cuh files of a folder.", "dir"},
    {"sha256", l_sha256, "spk.cuda.sha256(text) -> hex\nSHA-256 of text as 64 hex digits (the kernel cache's hash).", "text"},
    {"pack_args", l_pack_args,
     "spk.cuda.pack_args(param_sizes, args[, name]) -> {{kind =, size =}, ...}\n"
     "The argument check a launch makes, without a GPU.", "param_sizes, args, name"},
    {"u32", l_u32, "spk.u32(n) -> scalar\nA 32-bit unsigned kernel argument.", "n"},
    {"i32", l_i32, "spk.i32(n) -> scalar\nA 32-bit signed kernel argument.", "n"},
    {"u64", l_u64, "spk.u64(n) -> scalar\nA 64-bit unsigned kernel argument.", "n"},
    {"i64", l_i64, "spk.i64(n) -> scalar\nA 64-bit signed kernel argument.", "n"},
    {"f32", l_f32, "spk.f32(x) -> scalar\nA float kernel argument.", "x"},
    {"f64", l_f64, "spk.f64(x) -> scalar\nA double kernel argument.", "x"},
    {NULL, NULL, NULL, NULL},
};

void spk_open_cuda_kernels(lua_State *L, int cuda)
{
    spk_lua_newtype(L, &spk_lua_module_type);
    spk_lua_newtype(L, &kernel_type);
    spk_lua_newtype(L, &scalar_type);
    luaL_getmetatable(L, SCALAR_MT);
    luaL_setfuncs(L, scalar_metamethods, 0);
    lua_pop(L, 1);
    spk_lua_register(L, cuda, functions, "spk.cuda");
}
