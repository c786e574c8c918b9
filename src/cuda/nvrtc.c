/* NVRTC compilation, the on-disk cache of compiled code, and modules.
 *
 * Cache layout: one file per compile, <dir>/<key>.bin, where key is the
 * SHA-256 (hex) of everything that decides the output (see spk_compile_key).
 * An entry is an 88-byte header followed by the code:
 *   8 bytes  magic "SPKCACHE"
 *   4 bytes  format version (2), little-endian
 *   4 bytes  kind: 0 cubin, 1 PTX
 *   8 bytes  payload length
 *  32 bytes  the key the entry was made for (the SHA-256 its name spells)
 *  32 bytes  SHA-256 of the payload
 * Entries are written to a temporary file in the same folder and renamed into
 * place, so a reader sees a whole entry or none; a short or mismatching entry
 * (a crash, a full disk, tampering) is counted as rejected, recompiled and
 * rewritten.
 *
 * The folder is a trust boundary: whoever can write it can plant code that
 * spk loads. It is created with mode 0700, opened once, and used only if it
 * is a folder this user owns that nobody else can write; every entry is then
 * reached through that descriptor (openat, renameat), so the folder that was
 * checked is the one used, and entry paths never need PATH_MAX. Only files
 * the cache wrote (a <64 hex>.bin name and the SPKCACHE header) are counted
 * or removed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nvrtc.h>

#include "core/error.h"
#include "core/paths.h"
#include "core/file.h"
#include "cuda/internal.h"
#include "cuda/kernel_files.h"
#include "cuda/runtime.h"

/* ---- small helpers ----------------------------------------------------- */

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void hex(const uint8_t *bytes, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", bytes[i]);
}

/* ---- kernel folder and CUDA headers ------------------------------------ */

static char kernel_dir_override[PATH_MAX];

void spk_set_kernel_dir(const char *dir)
{
    snprintf(kernel_dir_override, sizeof kernel_dir_override, "%s", dir ? dir : "");
}

const char *spk_kernel_dir(void)
{
    if (kernel_dir_override[0])
        return kernel_dir_override;
    static _Thread_local char dir[PATH_MAX];
    return spk_find_dir("kernels", dir, sizeof dir) == 0 ? dir : NULL;
}

static const char *cuda_home(void)
{
    const char *env = getenv("CUDA_HOME");
    if (env && *env)
        return env;
    env = getenv("CUDA_PATH");
    return env && *env ? env : "/usr/local/cuda";
}

/* ---- options ----------------------------------------------------------- */

static int check_arch(const char *arch)
{
    const char *digits = NULL;
    if (strncmp(arch, "sm_", 3) == 0)
        digits = arch + 3;
    else if (strncmp(arch, "compute_", 8) == 0)
        digits = arch + 8;
    size_t n = digits ? strspn(digits, "0123456789") : 0;
    if (!digits || n < 2 || (digits[n] && strcmp(digits + n, "a") && strcmp(digits + n, "f")))
        return spk_fail("spk.cuda.compile: arch \"%s\" is not sm_XY or compute_XY (e.g. sm_90, compute_80)", arch);
    return 0;
}

static bool arch_is_ptx(const char *arch) { return strncmp(arch, "compute_", 8) == 0; }

/* The NVRTC options spk passes on: only those whose whole effect is on the
 * code NVRTC returns (or its log), so a compile reads nothing the cache key
 * does not cover, writes no file, and yields a cubin or PTX. The list is of
 * NVRTC's documented options (CUDA 13); anything not in it is refused, so an
 * option a later NVRTC adds is not passed on unexamined. */
typedef struct option_rule {
    const char *name;
    char form;       /* 'f' a flag, '=' takes "=value", 'p' a value attached (-Idir) */
    const char *why; /* NULL: accepted; else why it is refused */
} option_rule;

#define WRITES "writes a file"
#define NO_CODE "produces no cubin or PTX that spk can load"
#define RDC "separate compilation needs a device-link step that spk does not run"
#define READS "reads a file that the cache key does not cover (#include it in the source instead)"

static const option_rule option_rules[] = {
    {"-D", 'p', NULL}, {"--define-macro=", 'p', NULL}, {"-U", 'p', NULL}, {"--undefine-macro=", 'p', NULL},
    {"-I", 'p', NULL}, {"--include-path=", 'p', NULL},
    {"-G", 'f', NULL}, {"--device-debug", 'f', NULL}, {"-lineinfo", 'f', NULL}, {"--generate-line-info", 'f', NULL},
    {"-dopt", '=', NULL}, {"--dopt", '=', NULL}, {"-Ofc", '=', NULL}, {"--Ofast-compile", '=', NULL},
    {"-Xptxas", '=', NULL}, {"--ptxas-options", '=', NULL},
    {"-maxrregcount", '=', NULL}, {"--maxrregcount", '=', NULL},
    {"-ftz", '=', NULL}, {"--ftz", '=', NULL}, {"-prec-sqrt", '=', NULL}, {"--prec-sqrt", '=', NULL},
    {"-prec-div", '=', NULL}, {"--prec-div", '=', NULL}, {"-fmad", '=', NULL}, {"--fmad", '=', NULL},
    {"-use_fast_math", 'f', NULL}, {"--use_fast_math", 'f', NULL},
    {"-extra-device-vectorization", 'f', NULL}, {"--extra-device-vectorization", 'f', NULL},
    {"-modify-stack-limit", '=', NULL}, {"--modify-stack-limit", '=', NULL},
    {"-jtd", '=', NULL}, {"--jump-table-density", '=', NULL},
    {"-device-stack-protector", '=', NULL}, {"--device-stack-protector", '=', NULL},
    {"-split-compile", '=', NULL}, {"--split-compile", '=', NULL},
    {"-frandom-seed", '=', NULL}, {"--frandom-seed", '=', NULL},
    {"-std", '=', NULL}, {"--std", '=', NULL},
    {"-builtin-move-forward", '=', NULL}, {"--builtin-move-forward", '=', NULL},
    {"-builtin-initializer-list", '=', NULL}, {"--builtin-initializer-list", '=', NULL},
    {"-w", 'f', NULL}, {"--disable-warnings", 'f', NULL}, {"-restrict", 'f', NULL}, {"--restrict", 'f', NULL},
    {"-default-device", 'f', NULL}, {"--device-as-default-execution-space", 'f', NULL},
    {"-device-int128", 'f', NULL}, {"--device-int128", 'f', NULL},
    {"-err-no", 'f', NULL}, {"--display-error-number", 'f', NULL},
    {"-no-err-no", 'f', NULL}, {"--no-display-error-number", 'f', NULL},
    {"-diag-error", '=', NULL}, {"--diag-error", '=', NULL}, {"-diag-suppress", '=', NULL},
    {"--diag-suppress", '=', NULL}, {"-diag-warn", '=', NULL}, {"--diag-warn", '=', NULL},
    {"-brief-diag", '=', NULL}, {"--brief-diagnostics", '=', NULL},
    {"-opt-info", '=', NULL}, {"--optimization-info", '=', NULL},
    {"-no-source-include", 'f', NULL}, {"--no-source-include", 'f', NULL},
    {"-minimal", 'f', NULL}, {"--minimal", 'f', NULL},
    /* refused */
    {"-arch", '=', "sets the target, which is the arch = field"},
    {"--gpu-architecture", '=', "sets the target, which is the arch = field"},
    {"-time", '=', WRITES " (a CSV of compile-phase times)"}, {"--time", '=', WRITES " (a CSV of compile-phase times)"},
    {"-fdevice-time-trace", '=', WRITES " (a time trace)"}, {"--fdevice-time-trace", '=', WRITES " (a time trace)"},
    {"-create-pch", '=', WRITES " (a precompiled header)"}, {"--create-pch", '=', WRITES " (a precompiled header)"},
    {"-pch", 'f', WRITES " (precompiled headers)"}, {"--pch", 'f', WRITES " (precompiled headers)"},
    {"-pch-dir", '=', WRITES " (precompiled headers)"}, {"--pch-dir", '=', WRITES " (precompiled headers)"},
    {"-use-pch", '=', READS}, {"--use-pch", '=', READS}, {"-include", '=', READS}, {"--pre-include", '=', READS},
    {"-pch-verbose", '=', "concerns precompiled headers, which spk does not use"},
    {"--pch-verbose", '=', "concerns precompiled headers, which spk does not use"},
    {"-pch-messages", '=', "concerns precompiled headers, which spk does not use"},
    {"--pch-messages", '=', "concerns precompiled headers, which spk does not use"},
    {"-instantiate-templates-in-pch", '=', "concerns precompiled headers, which spk does not use"},
    {"--instantiate-templates-in-pch", '=', "concerns precompiled headers, which spk does not use"},
    {"-dlto", 'f', NO_CODE " (LTO IR)"}, {"--dlink-time-opt", 'f', NO_CODE " (LTO IR)"},
    {"-gen-opt-lto", 'f', NO_CODE " (LTO IR)"}, {"--gen-opt-lto", 'f', NO_CODE " (LTO IR)"},
    {"-optix-ir", 'f', NO_CODE " (OptiX IR)"}, {"--optix-ir", 'f', NO_CODE " (OptiX IR)"},
    {"-fdevice-syntax-only", 'f', NO_CODE " (a syntax check only)"},
    {"--fdevice-syntax-only", 'f', NO_CODE " (a syntax check only)"},
    {"-rdc", '=', RDC}, {"--relocatable-device-code", '=', RDC}, {"-dc", 'f', RDC}, {"--device-c", 'f', RDC},
    {"-dw", 'f', RDC}, {"--device-w", 'f', RDC}, {"-ewp", 'f', RDC}, {"--extensible-whole-program", 'f', RDC},
};

/* The ptxas option in --ptxas-options= (NVRTC hands the value to ptxas as
 * one argument; repeat the option for more): reports and code generation
 * only (ptxas also has options that write files). */
static const char *const ptxas_accepted[] = {
    "-v", "--verbose", "--warn-on-spills", "--warn-on-local-memory-usage", "--warn-on-double-precision-use",
    "-O0", "-O1", "-O2", "-O3", "--allow-expensive-optimizations=true", "--allow-expensive-optimizations=false",
    "--disable-optimizer-constants", NULL,
};
static const char *const ptxas_prefixes[] = {"--opt-level=", "--maxrregcount=", "-maxrregcount=",
                                             "--def-load-cache=", "--def-store-cache=", "--fmad=", NULL};

static int check_ptxas(const char *option, const char *value)
{
    for (int i = 0; ptxas_accepted[i]; i++)
        if (strcmp(value, ptxas_accepted[i]) == 0)
            return 0;
    for (int i = 0; ptxas_prefixes[i]; i++) {
        size_t m = strlen(ptxas_prefixes[i]);
        if (strncmp(value, ptxas_prefixes[i], m) == 0 && value[m] && strspn(value + m, "0123456789abcdefghijklmnopqrstuvwxyz") == strlen(value + m))
            return 0;
    }
    return spk_fail("spk.cuda.compile: option \"%s\": the ptxas option \"%s\" is not one spk passes on "
                    "(accepted, one per option: -v, --warn-on-spills, --warn-on-local-memory-usage, "
                    "--warn-on-double-precision-use, -O0..-O3, --opt-level=N, --maxrregcount=N, "
                    "--allow-expensive-optimizations=true|false, --def-load-cache=, --def-store-cache=, --fmad=, "
                    "--disable-optimizer-constants)", option, value);
}

static int check_option(const char *o)
{
    for (size_t i = 0; i < sizeof option_rules / sizeof *option_rules; i++) {
        const option_rule *r = &option_rules[i];
        size_t n = strlen(r->name);
        bool match;
        if (r->form == 'f')
            match = strcmp(o, r->name) == 0;
        else if (r->form == '=')
            match = strncmp(o, r->name, n) == 0 && (o[n] == '=' || o[n] == '\0');
        else
            match = strncmp(o, r->name, n) == 0;
        if (!match)
            continue;
        if (r->why)
            return spk_fail("spk.cuda.compile: option \"%s\" is refused: it %s", o, r->why);
        if (r->form == '=' && o[n] != '=')
            return spk_fail("spk.cuda.compile: option \"%s\" needs a value (%s=...)", o, r->name);
        if (r->form == 'p' && o[n] == '\0')
            return spk_fail("spk.cuda.compile: option \"%s\" needs its value attached (%s<value>)", o, r->name);
        if (strcmp(r->name, "-Xptxas") == 0 || strcmp(r->name, "--ptxas-options") == 0)
            return check_ptxas(o, o + n + 1);
        return 0;
    }
    return spk_fail("spk.cuda.compile: option \"%s\" is not an NVRTC option spk passes on (it accepts -D, -U, -I, "
                    "-G, -lineinfo, --ptxas-options=, --maxrregcount=, --ftz=, --prec-div=, --prec-sqrt=, --fmad=, "
                    "--use_fast_math, --std=, --dopt=, -Ofc=, diagnostics and the other options that change only "
                    "the code: see docs/reliability.md)", o);
}

static int check_inputs(const spk_compile_options *opts)
{
    for (int i = 0; i < opts->noptions; i++)
        if (!opts->options[i] || check_option(opts->options[i]))
            return opts->options[i] ? -1 : spk_fail("spk.cuda.compile: options[%d] is NULL", i + 1);
    return 0;
}

static int build_include_path(const spk_compile_options *opts, spk_include_path *ip)
{
    ip->n = 0;
    if (opts->file) {
        char dir[PATH_MAX];
        spk_dirname(opts->file, dir, sizeof dir);
        if (spk_include_path_add(ip, dir))
            return -1;
    }
    if (spk_include_path_add(ip, spk_kernel_dir()))
        return -1;
    for (int i = 0; i < opts->noptions; i++) {
        const char *o = opts->options[i];
        int rc = 0;
        if (strncmp(o, "-I", 2) == 0 && o[2])
            rc = spk_include_path_add(ip, o + 2);
        else if (strncmp(o, "--include-path=", 15) == 0)
            rc = spk_include_path_add(ip, o + 15);
        if (rc)
            return -1;
    }
    return 0;
}

/* ---- the cache key ----------------------------------------------------- */

static int key_for(const spk_compile_options *opts, const char *source, const char *arch, uint8_t out[32])
{
    spk_buffer key = {0};
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    char version[64];
    snprintf(version, sizeof version, "%d.%d", major, minor);
    int rc = spk_buffer_field(&key, "spk-kernel-cache", "1", 1) || spk_buffer_field(&key, "nvrtc", version, strlen(version)) ||
             spk_buffer_field(&key, "arch", arch, strlen(arch)) || spk_buffer_field(&key, "source", source, strlen(source));
    for (int i = 0; !rc && i < opts->ndefines; i++) {
        const char *value = opts->defines[i].value;
        rc = spk_buffer_field(&key, "define", opts->defines[i].name, strlen(opts->defines[i].name)) ||
             (value ? spk_buffer_field(&key, "value", value, strlen(value)) : spk_buffer_field(&key, "novalue", "", 0));
    }
    for (int i = 0; !rc && i < opts->noptions; i++)
        rc = spk_buffer_field(&key, "option", opts->options[i], strlen(opts->options[i]));
    if (!rc) {
        spk_include_path *ip = malloc(sizeof *ip);
        char from[PATH_MAX];
        if (opts->file)
            spk_dirname(opts->file, from, sizeof from);
        rc = !ip ? spk_fail("out of memory")
             : build_include_path(opts, ip) ? -1
             : spk_hash_includes(&key, source, opts->file ? from : NULL, ip);
        free(ip);
    }
    if (!rc)
        spk_sha256(key.data, key.len, out);
    free(key.data);
    return rc ? -1 : 0;
}

static char *load_source(const spk_compile_options *opts)
{
    if (opts->source)
        return strdup(opts->source);
    if (!opts->file)
        return spk_fail_null("spk.cuda.compile: give source or file");
    char *text = spk_kernel_source_read(opts->file, "a kernel source", NULL);
    if (!text)
        spk_error_prefix("spk.cuda.compile");
    return text;
}

int spk_compile_key(const spk_compile_options *opts, char key_hex[65])
{
    if (!opts->arch)
        return spk_fail("spk.cuda.compile: the cache key needs an arch");
    if (check_arch(opts->arch) || check_inputs(opts))
        return -1;
    char *source = load_source(opts);
    if (!source)
        return -1;
    uint8_t key[32];
    int rc = key_for(opts, source, opts->arch, key);
    free(source);
    if (rc == 0)
        hex(key, 32, key_hex);
    return rc;
}

/* ---- the cache --------------------------------------------------------- */

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    bool resolved;
    bool writable; /* entries are written (and read) */
    bool warned;
    int fd;        /* the folder, checked and held open; -1: no cache this session */
    char dir[PATH_MAX];
    long hits, misses, rejected;
} cache = {.fd = -1};
static char cache_dir_override[PATH_MAX];
static bool cache_dir_override_too_long;


/* Call with cache_lock held. Resets the state (and the warning) to "not yet
 * resolved". */
static void cache_forget(void)
{
    if (cache.fd >= 0)
        close(cache.fd);
    memset(&cache, 0, sizeof cache);
    cache.fd = -1;
}

/* Call with cache_lock held: one warning per folder and session. */
static void warn_no_cache(const char *fmt, const char *why)
{
    if (cache.warned)
        return;
    cache.warned = true;
    size_t n = strlen(cache.dir);
    if (n > 160) /* a path near PATH_MAX: its start and end say enough */
        fprintf(stderr, "spk: warning: kernel cache %.80s...%s ", cache.dir, cache.dir + n - 60);
    else
        fprintf(stderr, "spk: warning: kernel cache %s ", cache.dir);
    fprintf(stderr, fmt, why);
    fprintf(stderr, "; compiling without a cache\n");
}

/* The home folder: $HOME, else the password database's. */
static const char *home_dir(char *buf, size_t size)
{
    const char *home = getenv("HOME");
    if (home && *home)
        return home;
    struct passwd pw, *found = NULL;
    char scratch[4096];
    if (getpwuid_r(geteuid(), &pw, scratch, sizeof scratch, &found) == 0 && found && found->pw_dir &&
        found->pw_dir[0] == '/' && snprintf(buf, size, "%s", found->pw_dir) < (int)size)
        return buf;
    return NULL;
}

/* Call with cache_lock held. The folder: the override, $SPK_CACHE_DIR,
 * $XDG_CACHE_HOME/spk, ~/.cache/spk, or (no home) /tmp/spk-cache-<uid>; it
 * is used only if it is this user's and nobody else can write it. */
static void resolve_cache(void)
{
    if (cache.resolved)
        return;
    cache.resolved = true;
    cache.fd = -1;
    const char *env = getenv("SPK_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    char home_buf[PATH_MAX];
    const char *home = home_dir(home_buf, sizeof home_buf);
    int n;
    size_t want;
    if (cache_dir_override[0] || cache_dir_override_too_long) {
        n = snprintf(cache.dir, sizeof cache.dir, "%s", cache_dir_override);
        want = cache_dir_override_too_long ? sizeof cache.dir : (size_t)n;
    } else if (env && *env) {
        n = snprintf(cache.dir, sizeof cache.dir, "%s", env);
        want = (size_t)n;
    } else if (xdg && *xdg) {
        n = snprintf(cache.dir, sizeof cache.dir, "%s/spk", xdg);
        want = (size_t)n;
    } else if (home) {
        n = snprintf(cache.dir, sizeof cache.dir, "%s/.cache/spk", home);
        want = (size_t)n;
    } else {
        n = snprintf(cache.dir, sizeof cache.dir, "/tmp/spk-cache-%u", (unsigned)geteuid());
        want = (size_t)n;
    }
    if (want >= sizeof cache.dir) {
        char why[64];
        snprintf(why, sizeof why, "%zu bytes or more, the limit is %d", want, PATH_MAX - 1);
        warn_no_cache("path is too long (%s)", why);
        return;
    }
    /* 0700: the cache is private (~/.cache should be too) */
    if (spk_folder_make(cache.dir, 0700, NULL) != 0) {
        warn_no_cache("is not writable (%s)", spk_last_error());
        spk_clear_error();
        return;
    }
    int fd = open(cache.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        warn_no_cache("is not writable (%s)", strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    char why[160] = "";
    if (st.st_uid != geteuid())
        snprintf(why, sizeof why, "is owned by uid %u, not by this user (uid %u)", (unsigned)st.st_uid,
                 (unsigned)geteuid());
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        snprintf(why, sizeof why, "can be written by %s (mode %04o)",
                 (st.st_mode & S_IWOTH) ? "every user" : "its group", (unsigned)(st.st_mode & 07777));
    if (why[0]) {
        close(fd);
        warn_no_cache("is not safe: it %s, so others could plant code in it", why);
        return;
    }
    cache.fd = fd;
    cache.writable = access(cache.dir, W_OK | X_OK) == 0;
    if (!cache.writable)
        warn_no_cache("is not writable (%s)", strerror(errno));
}

/* The folder's descriptor for one operation, or -1: the checked folder
 * opened anew (its own directory offset for readdir; a concurrent
 * spk_cache_set_dir cannot close it under the caller). */
static int cache_fd(bool *writable)
{
    pthread_mutex_lock(&cache_lock);
    resolve_cache();
    int fd = cache.fd >= 0 ? openat(cache.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (writable)
        *writable = cache.writable && fd >= 0;
    pthread_mutex_unlock(&cache_lock);
    return fd;
}

void spk_cache_set_dir(const char *dir)
{
    pthread_mutex_lock(&cache_lock);
    cache_forget();
    cache_dir_override_too_long =
        snprintf(cache_dir_override, sizeof cache_dir_override, "%s", dir ? dir : "") >= (int)sizeof cache_dir_override;
    pthread_mutex_unlock(&cache_lock);
}

void spk_cache_reset(void)
{
    pthread_mutex_lock(&cache_lock);
    cache_forget();
    pthread_mutex_unlock(&cache_lock);
}

/* Whether `name` in the folder is a regular file that starts with the
 * cache's magic: a file the cache wrote. Its size in *bytes. */
static bool is_cache_file(int dir, const char *name, uint64_t *bytes)
{
    struct stat st;
    int fd = spk_file_openat(dir, name, name, &st);
    if (fd < 0)
        return false;
    char magic[8];
    bool ok = read(fd, magic, sizeof magic) == (ssize_t)sizeof magic && memcmp(magic, SPK_ENTRY_MAGIC, 8) == 0;
    close(fd);
    if (ok && bytes)
        *bytes = (uint64_t)st.st_size;
    return ok;
}

/* 1: hit (code filled), 0: absent, -1: present but refused (counted and
 * recompiled; a file that is no entry at all, or one made for another key,
 * is also named in a warning, since the cache never writes such a file). */
static int cache_read(int dir, const uint8_t key[32], const char *name, bool ptx, void **code, size_t *bytes)
{
    char shown[PATH_MAX + 80];
    pthread_mutex_lock(&cache_lock);
    snprintf(shown, sizeof shown, "%s/%s", cache.dir, name);
    pthread_mutex_unlock(&cache_lock);
    struct stat st;
    if (fstatat(dir, name, &st, 0) != 0 && errno == ENOENT)
        return 0;
    int fd = spk_file_openat(dir, name, shown, &st);
    size_t len = 0;
    char *data = fd < 0 ? NULL : spk_file_read_fd(fd, shown, SPK_ENTRY_MAX, "a kernel-cache entry", &len);
    if (fd >= 0)
        close(fd);
    if (!data) {
        if (errno == ENOENT && fstatat(dir, name, &st, 0) != 0)
            return 0; /* removed in between */
        fprintf(stderr, "spk: warning: %s; recompiling\n", spk_last_error());
        return -1;
    }
    spk_entry_status status = spk_entry_check(data, len, key, ptx, bytes);
    if (status == SPK_ENTRY_OTHER_KEY)
        fprintf(stderr, "spk: warning: kernel-cache entry %s was made for another key; recompiling\n", shown);
    if (status != SPK_ENTRY_OK) {
        free(data);
        return -1;
    }
    *code = malloc(*bytes ? *bytes : 1);
    if (!*code) {
        free(data);
        return 0;
    }
    memcpy(*code, data + SPK_ENTRY_HEADER, *bytes);
    free(data);
    return 1;
}

static void cache_write(int dir, const uint8_t key[32], const char *name, bool ptx, const void *code, size_t bytes)
{
    uint8_t header[SPK_ENTRY_HEADER];
    spk_entry_header(header, key, ptx, code, bytes);
    spk_file_out *out = spk_file_out_openat(dir, name, NULL, 0600);
    if (!out) {
        pthread_mutex_lock(&cache_lock);
        cache.writable = false;
        warn_no_cache("is not writable (%s)", spk_last_error());
        pthread_mutex_unlock(&cache_lock);
        return;
    }
    FILE *f = spk_file_out_stream(out);
    if (fwrite(header, 1, sizeof header, f) == sizeof header)
        fwrite(code, 1, bytes, f);
    spk_file_out_commit(out); /* a failed write leaves no file; the entry is made again next time */
}

int spk_cache_get_info(spk_cache_info *out)
{
    memset(out, 0, sizeof *out);
    int dir = cache_fd(&out->writable);
    pthread_mutex_lock(&cache_lock);
    snprintf(out->dir, sizeof out->dir, "%s", cache.dir);
    out->hits = cache.hits;
    out->misses = cache.misses;
    out->rejected = cache.rejected;
    pthread_mutex_unlock(&cache_lock);
    if (dir < 0)
        return 0;
    DIR *d = fdopendir(dir);
    if (!d) {
        close(dir);
        return 0;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        uint64_t size;
        if (spk_is_entry_name(e->d_name) && is_cache_file(dirfd(d), e->d_name, &size)) {
            out->entries++;
            out->bytes += size;
        }
    }
    closedir(d);
    return 0;
}

int spk_cache_clear(void)
{
    int dir = cache_fd(NULL);
    if (dir < 0) {
        pthread_mutex_lock(&cache_lock);
        int rc = spk_fail("spk.cuda.cache_clear: the kernel cache %s is not in use (see the warning)", cache.dir);
        pthread_mutex_unlock(&cache_lock);
        return rc;
    }
    DIR *d = fdopendir(dir);
    if (!d) {
        int err = errno;
        close(dir);
        return spk_fail("spk.cuda.cache_clear: %s: %s", cache.dir, strerror(err));
    }
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        /* Only what the cache wrote: an entry name and header, or one of its
         * temporary files; a user's firmware.bin stays. */
        struct stat st;
        bool ours = spk_is_entry_name(e->d_name) ? is_cache_file(dirfd(d), e->d_name, NULL)
                    : spk_is_entry_temp_name(e->d_name) ? fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                                                    S_ISREG(st.st_mode)
                                              : false;
        if (!ours)
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) != 0 && errno != ENOENT) {
            pthread_mutex_lock(&cache_lock);
            rc = spk_fail("spk.cuda.cache_clear: %s/%s: %s", cache.dir, e->d_name, strerror(errno));
            pthread_mutex_unlock(&cache_lock);
        }
    }
    closedir(d);
    return rc;
}

/* ---- modules ----------------------------------------------------------- */

struct spk_module {
    int refcount;
    void *code;
    size_t bytes;
    bool ptx;
    bool from_cache;
    char arch[32];
    char key[65];
    char *log;
    pthread_mutex_t lock;
    bool loaded;
    cudaLibrary_t library;
};

static spk_module *module_new(void *code, size_t bytes, bool ptx, const char *arch, const char *key,
                              const char *log, bool from_cache)
{
    spk_module *m = calloc(1, sizeof *m);
    if (!m) {
        free(code);
        return spk_fail_null("out of memory allocating a module");
    }
    m->refcount = 1;
    m->code = code;
    m->bytes = bytes;
    m->ptx = ptx;
    m->from_cache = from_cache;
    snprintf(m->arch, sizeof m->arch, "%s", arch);
    snprintf(m->key, sizeof m->key, "%s", key);
    m->log = strdup(log ? log : "");
    pthread_mutex_init(&m->lock, NULL);
    return m;
}

void spk_module_retain(spk_module *m)
{
    if (m)
        __atomic_add_fetch(&m->refcount, 1, __ATOMIC_RELAXED);
}

void spk_module_release(spk_module *m)
{
    if (!m || __atomic_sub_fetch(&m->refcount, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    if (m->loaded) {
        cudaLibraryUnload(m->library);
        cudaGetLastError();
    }
    pthread_mutex_destroy(&m->lock);
    free(m->code);
    free(m->log);
    free(m);
}

const void *spk_module_code(const spk_module *m, size_t *bytes)
{
    if (bytes)
        *bytes = m->bytes;
    return m->code;
}

bool spk_module_is_ptx(const spk_module *m) { return m->ptx; }
const char *spk_module_arch(const spk_module *m) { return m->arch; }
const char *spk_module_log(const spk_module *m) { return m->log; }
bool spk_module_from_cache(const spk_module *m) { return m->from_cache; }
const char *spk_module_key(const spk_module *m) { return m->key; }

/* Loads the code into the runtime once (all devices, lazily per context). */
int spk_module_library(spk_module *m, void **library)
{
    if (spk_cuda_require())
        return -1;
    pthread_mutex_lock(&m->lock);
    int rc = 0;
    if (!m->loaded) {
        rc = spk_cuda_check(cudaLibraryLoadData(&m->library, m->code, NULL, NULL, 0, NULL, NULL, 0),
                            "cudaLibraryLoadData");
        m->loaded = rc == 0;
    }
    pthread_mutex_unlock(&m->lock);
    if (rc == 0)
        *library = m->library;
    return rc;
}

/* ---- compiling --------------------------------------------------------- */

static char *program_log(nvrtcProgram prog)
{
    size_t n = 0;
    if (nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n == 0)
        return strdup("");
    char *log = malloc(n + 1);
    if (!log)
        return NULL;
    if (nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
        log[0] = '\0';
    log[n] = '\0';
    return log;
}

static int run_nvrtc(const spk_compile_options *opts, const char *source, const char *arch,
                     void **code, size_t *bytes, char **log_out)
{
    spk_include_path ip;
    if (build_include_path(opts, &ip))
        return -1;
    int nopts = 0, cap = 8 + opts->ndefines + opts->noptions + ip.n;
    char **argv = calloc((size_t)cap, sizeof *argv);
    if (!argv)
        return spk_fail("out of memory");
    int rc = -1;
    nvrtcProgram prog = NULL;
    char *log = NULL;
#define ADD(...)                                                                 \
    do {                                                                         \
        if (asprintf(&argv[nopts], __VA_ARGS__) < 0) {                           \
            argv[nopts] = NULL;                                                  \
            spk_fail("out of memory");                                           \
            goto done;                                                           \
        }                                                                        \
        nopts++;                                                                 \
    } while (0)
    ADD("-arch=%s", arch);
    for (int i = 0; i < ip.n; i++)
        if (i < 2) /* the source folder and kernel folder; -I options pass through below */
            ADD("-I%s", ip.dirs[i]);
    /* NVRTC has no built-in path to the toolkit's headers (cooperative_groups.h
     * and the libcu++ headers it includes live in include/ and include/cccl). */
    ADD("-I%s/include", cuda_home());
    char cccl[PATH_MAX];
    snprintf(cccl, sizeof cccl, "%s/include/cccl", cuda_home());
    if (is_dir(cccl))
        ADD("-I%s", cccl);
    for (int i = 0; i < opts->ndefines; i++) {
        if (opts->defines[i].value)
            ADD("-D%s=%s", opts->defines[i].name, opts->defines[i].value);
        else
            ADD("-D%s", opts->defines[i].name);
    }
    for (int i = 0; i < opts->noptions; i++)
        ADD("%s", opts->options[i]);
#undef ADD

    const char *name = opts->file ? opts->file : "source.cu";
    nvrtcResult r = nvrtcCreateProgram(&prog, source, name, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        spk_fail("spk.cuda.compile: nvrtcCreateProgram: %s", nvrtcGetErrorString(r));
        goto done;
    }
    r = nvrtcCompileProgram(prog, nopts, (const char *const *)argv);
    log = program_log(prog);
    if (r != NVRTC_SUCCESS) {
        spk_fail("spk.cuda.compile: %s failed for %s (%s):\n%s", name, arch, nvrtcGetErrorString(r),
                 log ? log : "");
        goto done;
    }
    bool ptx = arch_is_ptx(arch);
    r = ptx ? nvrtcGetPTXSize(prog, bytes) : nvrtcGetCUBINSize(prog, bytes);
    if (r == NVRTC_SUCCESS) {
        *code = malloc(*bytes ? *bytes : 1);
        if (!*code) {
            spk_fail("out of memory");
            goto done;
        }
        r = ptx ? nvrtcGetPTX(prog, *code) : nvrtcGetCUBIN(prog, *code);
        if (r != NVRTC_SUCCESS) {
            free(*code);
            *code = NULL;
        }
    }
    if (r != NVRTC_SUCCESS) {
        spk_fail("spk.cuda.compile: fetching the %s: %s", ptx ? "PTX" : "cubin", nvrtcGetErrorString(r));
        goto done;
    }
    /* A compile that returns no code (whatever option caused it) is no module. */
    if (*bytes <= (ptx ? 1u : 0u)) {
        free(*code);
        *code = NULL;
        spk_fail("spk.cuda.compile: %s for %s: NVRTC returned no %s", name, arch, ptx ? "PTX" : "cubin");
        goto done;
    }
    rc = 0;
done:
    if (prog)
        nvrtcDestroyProgram(&prog);
    for (int i = 0; i < nopts; i++)
        free(argv[i]);
    free(argv);
    if (rc == 0 && log_out)
        *log_out = log;
    else
        free(log);
    return rc;
}

spk_module *spk_compile(const spk_compile_options *opts)
{
    char arch[32];
    if (opts->arch) {
        if (check_arch(opts->arch))
            return NULL;
        snprintf(arch, sizeof arch, "%s", opts->arch);
    } else if (spk_device_arch(arch, sizeof arch)) {
        spk_error_prefix("spk.cuda.compile: no arch given and the device's is unknown");
        return NULL;
    }
    if (check_inputs(opts))
        return NULL;
    char *source = load_source(opts);
    if (!source)
        return NULL;
    uint8_t key[32];
    if (key_for(opts, source, arch, key)) {
        free(source);
        return NULL;
    }
    char key_hex[SPK_KEY_HEX + 1], name[SPK_KEY_HEX + 8];
    hex(key, 32, key_hex);
    snprintf(name, sizeof name, "%s.bin", key_hex);
    bool ptx = arch_is_ptx(arch);

    bool writable = false;
    int dir = opts->no_cache ? -1 : cache_fd(&writable);
    void *code = NULL;
    size_t bytes = 0;
    if (dir >= 0) {
        int found = cache_read(dir, key, name, ptx, &code, &bytes);
        pthread_mutex_lock(&cache_lock);
        if (found == 1)
            cache.hits++;
        else
            cache.misses++;
        if (found < 0)
            cache.rejected++;
        pthread_mutex_unlock(&cache_lock);
        if (found == 1) {
            close(dir);
            free(source);
            return module_new(code, bytes, ptx, arch, key_hex, "", true);
        }
    }
    char *log = NULL;
    int rc = run_nvrtc(opts, source, arch, &code, &bytes, &log);
    free(source);
    if (rc) {
        if (dir >= 0)
            close(dir);
        free(log);
        return NULL;
    }
    if (dir >= 0) {
        if (writable)
            cache_write(dir, key, name, ptx, code, bytes);
        close(dir);
    }
    spk_module *m = module_new(code, bytes, ptx, arch, key_hex, log, false);
    free(log);
    return m;
}
