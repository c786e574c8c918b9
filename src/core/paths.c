/* The lookup of spk's own folders (the rule is in paths.h). */
#include "core/paths.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

/* Each kind: its variable, its folder below an install prefix (make install's
 * layout first, then a LuaRocks tree's, which keeps spk's data beside its Lua
 * files) and below the source tree. A new kind is one more row. */
typedef struct place {
    const char *kind;
    const char *env;
    const char *installed[2];
    const char *tree;
} place;

static const place places[] = {
    {"lua", "SPK_LUA_DIR", {"share/lua/5.4", NULL}, "lua"},
    {"kernels", "SPK_KERNEL_DIR", {"share/spk/kernels", "share/lua/5.4/spk/kernels"}, "kernels"},
    {"experiments", "SPK_EXPERIMENT_DIR", {"share/spk/experiments", "share/lua/5.4/spk/experiments"}, "experiments"},
    {"tools", "SPK_TOOL_DIR", {"share/spk/tools", "share/lua/5.4/spk/tools"}, "tools"},
};
#define NPLACES (sizeof places / sizeof *places)

/* What marks each root as spk's. */
#define INSTALLED_MARK "share/lua/5.4/spk/init.lua"
#define TREE_MARK "lua/spk/init.lua"

static const place *find_place(const char *kind)
{
    for (size_t i = 0; kind && i < NPLACES; i++)
        if (strcmp(places[i].kind, kind) == 0)
            return &places[i];
    return NULL;
}

const char *spk_dir_kind(int i)
{
    return i >= 0 && (size_t)i < NPLACES ? places[i].kind : NULL;
}

const char *spk_dir_env(const char *kind)
{
    const place *p = find_place(kind);
    return p ? p->env : NULL;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool has_file(const char *dir, const char *name)
{
    char path[PATH_MAX];
    return snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path && access(path, R_OK) == 0;
}

/* Removes the last component of path in place ("/a/b" -> "/a", "/a" -> "/");
 * returns that component, or NULL when there is none. */
static const char *strip_last(char *path)
{
    char *slash = strrchr(path, '/');
    if (!slash || !slash[1])
        return NULL;
    static _Thread_local char last[NAME_MAX + 1];
    snprintf(last, sizeof last, "%s", slash + 1);
    if (slash == path)
        slash[1] = '\0';
    else
        *slash = '\0';
    return last;
}

/* ---- the roots ----------------------------------------------------------- */

typedef struct roots {
    char self[PATH_MAX];      /* the program or module holding this code ("" unknown) */
    char installed[PATH_MAX]; /* the prefix its place implies ("" none) */
    char tree[PATH_MAX];      /* the tree around its build folder ("" none) */
} roots;

static roots found_roots;
static pthread_once_t roots_once = PTHREAD_ONCE_INIT;

/* The file this code was loaded from: the module's path, or for the program
 * (whose dladdr name is argv[0]) /proc/self/exe. */
static void locate_self(char *out, size_t size)
{
    out[0] = '\0';
    Dl_info info;
    struct link_map *map = NULL;
    if (dladdr1((void *)spk_find_dir, &info, (void **)&map, RTLD_DL_LINKMAP) && map && map->l_name[0] &&
        info.dli_fname && realpath(info.dli_fname, out))
        return;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        snprintf(out, size, "%s", exe);
    }
}

static void find_roots(void)
{
    roots *r = &found_roots;
    locate_self(r->self, sizeof r->self);
    if (!r->self[0])
        return;
    char dir[sizeof r->self];
    memcpy(dir, r->self, sizeof dir);
    strip_last(dir);

    /* <prefix>/bin/spk, or <prefix>/lib[/<multiarch>]/lua/5.4/spk.so */
    char prefix[PATH_MAX];
    snprintf(prefix, sizeof prefix, "%s", dir);
    const char *last = strip_last(prefix);
    bool shaped = last && strcmp(last, "bin") == 0;
    if (!shaped && last && strcmp(last, "5.4") == 0 && (last = strip_last(prefix)) && strcmp(last, "lua") == 0) {
        last = strip_last(prefix);
        if (last && strncmp(last, "lib", 3) != 0)
            last = strip_last(prefix); /* lib/x86_64-linux-gnu */
        shaped = last && (strcmp(last, "lib") == 0 || strcmp(last, "lib64") == 0);
    }
    if (shaped && has_file(prefix, INSTALLED_MARK))
        snprintf(r->installed, sizeof r->installed, "%s", prefix);

    /* <tree>/<build folder>/spk or spk.so, <tree>/<build folder>/tests/test_x */
    char tree[PATH_MAX];
    snprintf(tree, sizeof tree, "%s", dir);
    for (int up = 0; up < 2 && strip_last(tree); up++) {
        if (has_file(tree, TREE_MARK)) {
            snprintf(r->tree, sizeof r->tree, "%s", tree);
            break;
        }
    }
}

static int in_root(const place *p, const char *root, const char *const *below, size_t nbelow, const char *what,
                   char *out, size_t size)
{
    for (size_t i = 0; i < nbelow && below[i]; i++) {
        char dir[PATH_MAX];
        if (snprintf(dir, sizeof dir, "%s/%s", root, below[i]) < (int)sizeof dir && is_dir(dir)) {
            snprintf(out, size, "%s", dir);
            return 0;
        }
    }
    return spk_fail("%s %s has no %s folder (%s%s%s); set %s to the folder holding them", what, root, p->kind,
                    below[0], nbelow > 1 && below[1] ? " or " : "", nbelow > 1 && below[1] ? below[1] : "", p->env);
}

int spk_find_dir(const char *kind, char *out, size_t size)
{
    const place *p = find_place(kind);
    if (!p) {
        char kinds[256] = "";
        for (size_t i = 0; i < NPLACES; i++)
            snprintf(kinds + strlen(kinds), sizeof kinds - strlen(kinds), "%s%s", i ? ", " : "", places[i].kind);
        return spk_fail("unknown kind of folder \"%s\" (one of %s)", kind ? kind : "", kinds);
    }
    const char *env = getenv(p->env);
    if (env && *env) {
        if (!is_dir(env))
            return spk_fail("%s is \"%s\", which is not a folder", p->env, env);
        snprintf(out, size, "%s", env);
        return 0;
    }
    pthread_once(&roots_once, find_roots);
    const roots *r = &found_roots;
    if (r->installed[0])
        return in_root(p, r->installed, p->installed, 2, "the installed spk at", out, size);
    const char *tree[1] = {p->tree};
    if (r->tree[0])
        return in_root(p, r->tree, tree, 1, "the source tree", out, size);
#ifdef SPK_SOURCE_DIR
    if (has_file(SPK_SOURCE_DIR, TREE_MARK))
        return in_root(p, SPK_SOURCE_DIR, tree, 1, "the source tree", out, size);
#endif
    return spk_fail("cannot find spk's %s folder: %s is neither installed (no %s above it) nor in a "
                    "build folder of a source tree (no %s beside it)%s; set %s to the folder",
                    p->kind, r->self[0] ? r->self : "this program", INSTALLED_MARK, TREE_MARK,
#ifdef SPK_SOURCE_DIR
                    ", and the source tree it was built from (" SPK_SOURCE_DIR ") is gone",
#else
                    "",
#endif
                    p->env);
}

int spk_find_file(const char *relative, char *out, size_t size)
{
    if (!relative || relative[0] == '/')
        return -1;
    const char *slash = strchr(relative, '/');
    if (!slash || !slash[1])
        return -1;
    char kind[64];
    if ((size_t)(slash - relative) >= sizeof kind)
        return -1;
    snprintf(kind, sizeof kind, "%.*s", (int)(slash - relative), relative);
    char dir[PATH_MAX];
    if (!find_place(kind) || spk_find_dir(kind, dir, sizeof dir) != 0) {
        spk_clear_error();
        return -1;
    }
    if (snprintf(out, size, "%s/%s", dir, slash + 1) >= (int)size || access(out, R_OK) != 0)
        return -1;
    return 0;
}
