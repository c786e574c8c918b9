/* NVRTC compilation, the on-disk cache of compiled code, and modules.
 *
 * Cache layout: one file per compile, <dir>/<key>.bin, where key is the
 * SHA-256 (hex) of everything that decides the output (see spk_compile_key).
 * An entry is a 56-byte header followed by the code:
 *   8 bytes  magic "SPKCACHE"
 *   4 bytes  format version (1), little-endian
 *   4 bytes  kind: 0 cubin, 1 PTX
 *   8 bytes  payload length
 *  32 bytes  SHA-256 of the payload
 * Entries are written to a temporary file in the same folder and renamed into
 * place, so a reader sees a whole entry or none; a short or mismatching entry
 * (a crash, a full disk, tampering) is counted as rejected, recompiled and
 * rewritten. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nvrtc.h>

#include "core/error.h"
#include "core/paths.h"
#include "cuda/internal.h"
#include "cuda/runtime.h"

/* ---- small helpers ----------------------------------------------------- */

typedef struct buffer {
    char *data;
    size_t len, cap;
} buffer;

static int buf_add(buffer *b, const void *data, size_t len)
{
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + len + 1)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown)
            return spk_fail("out of memory");
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}

/* Adds a length-prefixed field, so that no two inputs hash alike by shifting
 * text from one field into the next. */
static int buf_field(buffer *b, const char *tag, const void *data, size_t len)
{
    char head[96];
    int n = snprintf(head, sizeof head, "%s %zu\n", tag, len);
    return buf_add(b, head, (size_t)n) || buf_add(b, data, len) || buf_add(b, "\n", 1);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    buffer b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (buf_add(&b, chunk, n)) {
            free(b.data);
            fclose(f);
            return NULL;
        }
    }
    fclose(f);
    if (!b.data && buf_add(&b, "", 0))
        return NULL;
    if (len)
        *len = b.len;
    return b.data;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void dirname_of(const char *path, char *out, size_t size)
{
    snprintf(out, size, "%s", path);
    char *slash = strrchr(out, '/');
    if (slash == out)
        out[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(out, size, ".");
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

/* The include folders, in search order: the source file's folder, the
 * kernel folder, then -I / --include-path options. */
typedef struct include_path {
    char dirs[16][PATH_MAX];
    int n;
} include_path;

static void add_dir(include_path *ip, const char *dir)
{
    if (ip->n < 16 && dir && *dir)
        snprintf(ip->dirs[ip->n++], PATH_MAX, "%s", dir);
}

static void build_include_path(const spk_compile_options *opts, include_path *ip)
{
    ip->n = 0;
    if (opts->file) {
        char dir[PATH_MAX];
        dirname_of(opts->file, dir, sizeof dir);
        add_dir(ip, dir);
    }
    add_dir(ip, spk_kernel_dir());
    for (int i = 0; i < opts->noptions; i++) {
        const char *o = opts->options[i];
        if (strncmp(o, "-I", 2) == 0 && o[2])
            add_dir(ip, o + 2);
        else if (strncmp(o, "--include-path=", 15) == 0)
            add_dir(ip, o + 15);
    }
}

/* ---- the cache key ----------------------------------------------------- */

/* Hashes the content of every #include "name" in text, recursively. Angle
 * includes are the toolkit's: they are covered by the NVRTC version. */
static int hash_includes(buffer *key, const char *text, const char *from_dir, const include_path *ip,
                         char (*seen)[PATH_MAX], int *nseen, int depth)
{
    if (depth > 32)
        return spk_fail("spk.cuda.compile: #include nesting deeper than 32");
    for (const char *line = text; line && *line;) {
        const char *p = line + strspn(line, " \t");
        const char *next = strchr(line, '\n');
        line = next ? next + 1 : NULL;
        if (*p != '#')
            continue;
        p += 1 + strspn(p + 1, " \t");
        if (strncmp(p, "include", 7) != 0)
            continue;
        p += 7 + strspn(p + 7, " \t");
        if (*p != '"')
            continue;
        const char *end = strchr(p + 1, '"');
        if (!end || (next && end > next))
            continue;
        char name[PATH_MAX];
        snprintf(name, sizeof name, "%.*s", (int)(end - p - 1), p + 1);

        char found[PATH_MAX] = "";
        char candidate[PATH_MAX];
        if (name[0] == '/') {
            snprintf(candidate, sizeof candidate, "%s", name);
            if (access(candidate, R_OK) == 0)
                snprintf(found, sizeof found, "%s", candidate);
        } else {
            const char *dirs[17];
            int ndirs = 0;
            if (from_dir)
                dirs[ndirs++] = from_dir;
            for (int i = 0; i < ip->n; i++)
                dirs[ndirs++] = ip->dirs[i];
            for (int i = 0; i < ndirs && !found[0]; i++) {
                if (snprintf(candidate, sizeof candidate, "%s/%s", dirs[i], name) >= (int)sizeof candidate)
                    continue;
                if (access(candidate, R_OK) == 0)
                    snprintf(found, sizeof found, "%s", candidate);
            }
        }
        if (!found[0]) {
            if (buf_field(key, "missing-include", name, strlen(name)))
                return -1;
            continue;
        }
        char real[PATH_MAX];
        if (!realpath(found, real))
            snprintf(real, sizeof real, "%s", found);
        bool again = false;
        for (int i = 0; i < *nseen; i++)
            again = again || strcmp(seen[i], real) == 0;
        if (again)
            continue;
        if (*nseen < 256)
            snprintf(seen[(*nseen)++], PATH_MAX, "%s", real);
        size_t len;
        char *content = read_file(found, &len);
        if (!content)
            return spk_fail("spk.cuda.compile: cannot read include %s: %s", found, strerror(errno));
        char dir[PATH_MAX];
        dirname_of(found, dir, sizeof dir);
        int rc = buf_field(key, "include", name, strlen(name)) || buf_field(key, "content", content, len) ||
                 hash_includes(key, content, dir, ip, seen, nseen, depth + 1);
        free(content);
        if (rc)
            return -1;
    }
    return 0;
}

static int key_for(const spk_compile_options *opts, const char *source, const char *arch, char out[65])
{
    buffer key = {0};
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    char version[64];
    snprintf(version, sizeof version, "%d.%d", major, minor);
    int rc = buf_field(&key, "spk-kernel-cache", "1", 1) || buf_field(&key, "nvrtc", version, strlen(version)) ||
             buf_field(&key, "arch", arch, strlen(arch)) || buf_field(&key, "source", source, strlen(source));
    for (int i = 0; !rc && i < opts->ndefines; i++) {
        const char *value = opts->defines[i].value;
        rc = buf_field(&key, "define", opts->defines[i].name, strlen(opts->defines[i].name)) ||
             (value ? buf_field(&key, "value", value, strlen(value)) : buf_field(&key, "novalue", "", 0));
    }
    for (int i = 0; !rc && i < opts->noptions; i++)
        rc = buf_field(&key, "option", opts->options[i], strlen(opts->options[i]));
    if (!rc) {
        include_path ip;
        build_include_path(opts, &ip);
        char(*seen)[PATH_MAX] = malloc(256 * sizeof *seen);
        int nseen = 0;
        char from[PATH_MAX];
        if (opts->file)
            dirname_of(opts->file, from, sizeof from);
        rc = !seen ? spk_fail("out of memory") : hash_includes(&key, source, opts->file ? from : NULL, &ip, seen, &nseen, 0);
        free(seen);
    }
    if (!rc) {
        uint8_t digest[32];
        spk_sha256(key.data, key.len, digest);
        hex(digest, 32, out);
    }
    free(key.data);
    return rc ? -1 : 0;
}

static char *load_source(const spk_compile_options *opts)
{
    if (opts->source)
        return strdup(opts->source);
    if (!opts->file)
        return spk_fail_null("spk.cuda.compile: give source or file");
    char *text = read_file(opts->file, NULL);
    if (!text)
        return spk_fail_null("spk.cuda.compile: cannot read %s: %s", opts->file, strerror(errno));
    return text;
}

int spk_compile_key(const spk_compile_options *opts, char key_hex[65])
{
    if (!opts->arch)
        return spk_fail("spk.cuda.compile: the cache key needs an arch");
    if (check_arch(opts->arch))
        return -1;
    char *source = load_source(opts);
    if (!source)
        return -1;
    int rc = key_for(opts, source, opts->arch, key_hex);
    free(source);
    return rc;
}

/* ---- the cache --------------------------------------------------------- */

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    bool resolved;
    bool writable;
    bool warned;
    char dir[PATH_MAX];
    long hits, misses, rejected;
} cache;
static char cache_dir_override[PATH_MAX];

#define ENTRY_MAGIC "SPKCACHE"
#define ENTRY_HEADER 56
#define ENTRY_VERSION 1u

static int mkdirs(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0755) && errno != EEXIST)
        return -1;
    return is_dir(tmp) ? 0 : (errno = ENOTDIR, -1);
}

static void warn_unwritable(const char *why)
{
    if (cache.warned)
        return;
    cache.warned = true;
    fprintf(stderr, "spk: warning: kernel cache %s is not writable (%s); compiling without a cache\n",
            cache.dir, why);
}

/* Call with cache_lock held. */
static void resolve_cache(void)
{
    if (cache.resolved)
        return;
    cache.resolved = true;
    const char *env = getenv("SPK_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (cache_dir_override[0])
        snprintf(cache.dir, sizeof cache.dir, "%s", cache_dir_override);
    else if (env && *env)
        snprintf(cache.dir, sizeof cache.dir, "%s", env);
    else if (xdg && *xdg)
        snprintf(cache.dir, sizeof cache.dir, "%s/spk", xdg);
    else
        snprintf(cache.dir, sizeof cache.dir, "%s/.cache/spk", home && *home ? home : "/tmp");
    cache.writable = mkdirs(cache.dir) == 0 && access(cache.dir, W_OK | X_OK) == 0;
    if (!cache.writable)
        warn_unwritable(strerror(errno));
}

void spk_cache_set_dir(const char *dir)
{
    pthread_mutex_lock(&cache_lock);
    snprintf(cache_dir_override, sizeof cache_dir_override, "%s", dir ? dir : "");
    memset(&cache, 0, sizeof cache);
    pthread_mutex_unlock(&cache_lock);
}

void spk_cache_reset(void)
{
    pthread_mutex_lock(&cache_lock);
    memset(&cache, 0, sizeof cache);
    pthread_mutex_unlock(&cache_lock);
}

static void entry_path(const char *key, char *out, size_t size)
{
    if (snprintf(out, size, "%s/%s.bin", cache.dir, key) >= (int)size)
        out[0] = '\0'; /* an over-long folder: the read and write then fail */
}

static void put_u32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put_u64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint32_t get_u32(const uint8_t *p) { uint32_t v = 0; for (int i = 3; i >= 0; i--) v = v << 8 | p[i]; return v; }
static uint64_t get_u64(const uint8_t *p) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = v << 8 | p[i]; return v; }

/* 1: hit (code filled), 0: absent, -1: present but invalid. */
static int cache_read(const char *key, bool ptx, void **code, size_t *bytes)
{
    char path[PATH_MAX];
    entry_path(key, path, sizeof path);
    size_t len;
    char *data = read_file(path, &len);
    if (!data)
        return 0;
    const uint8_t *h = (const uint8_t *)data;
    uint8_t digest[32];
    bool valid = len >= ENTRY_HEADER && memcmp(h, ENTRY_MAGIC, 8) == 0 && get_u32(h + 8) == ENTRY_VERSION &&
                 get_u32(h + 12) == (ptx ? 1u : 0u) && get_u64(h + 16) == len - ENTRY_HEADER;
    if (valid) {
        spk_sha256(h + ENTRY_HEADER, len - ENTRY_HEADER, digest);
        valid = memcmp(digest, h + 24, 32) == 0;
    }
    if (!valid) {
        free(data);
        return -1;
    }
    *bytes = len - ENTRY_HEADER;
    *code = malloc(*bytes ? *bytes : 1);
    if (!*code) {
        free(data);
        return 0;
    }
    memcpy(*code, h + ENTRY_HEADER, *bytes);
    free(data);
    return 1;
}

static void cache_write(const char *key, bool ptx, const void *code, size_t bytes)
{
    char path[PATH_MAX], tmp[PATH_MAX + 64];
    entry_path(key, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%lx", path, (long)getpid(), (unsigned long)pthread_self());
    uint8_t header[ENTRY_HEADER];
    memcpy(header, ENTRY_MAGIC, 8);
    put_u32(header + 8, ENTRY_VERSION);
    put_u32(header + 12, ptx ? 1u : 0u);
    put_u64(header + 16, bytes);
    spk_sha256(code, bytes, header + 24);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        pthread_mutex_lock(&cache_lock);
        cache.writable = false;
        warn_unwritable(strerror(errno));
        pthread_mutex_unlock(&cache_lock);
        return;
    }
    bool ok = fwrite(header, 1, sizeof header, f) == sizeof header && fwrite(code, 1, bytes, f) == bytes;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0)
        unlink(tmp);
}

int spk_cache_get_info(spk_cache_info *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&cache_lock);
    resolve_cache();
    snprintf(out->dir, sizeof out->dir, "%s", cache.dir);
    out->writable = cache.writable;
    out->hits = cache.hits;
    out->misses = cache.misses;
    out->rejected = cache.rejected;
    pthread_mutex_unlock(&cache_lock);
    DIR *d = opendir(out->dir);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".bin") != 0)
            continue;
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", out->dir, e->d_name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            out->entries++;
            out->bytes += (uint64_t)st.st_size;
        }
    }
    closedir(d);
    return 0;
}

int spk_cache_clear(void)
{
    pthread_mutex_lock(&cache_lock);
    resolve_cache();
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", cache.dir);
    pthread_mutex_unlock(&cache_lock);
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : spk_fail("spk.cuda.cache_clear: %s: %s", dir, strerror(errno));
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        bool entry = n > 4 && strcmp(e->d_name + n - 4, ".bin") == 0;
        bool temp = strstr(e->d_name, ".bin.tmp.") != NULL;
        if (!entry && !temp)
            continue;
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0 && errno != ENOENT)
            rc = spk_fail("spk.cuda.cache_clear: %s: %s", path, strerror(errno));
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
    include_path ip;
    build_include_path(opts, &ip);
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
    char *source = load_source(opts);
    if (!source)
        return NULL;
    char key[65];
    if (key_for(opts, source, arch, key)) {
        free(source);
        return NULL;
    }
    bool ptx = arch_is_ptx(arch);

    pthread_mutex_lock(&cache_lock);
    resolve_cache();
    bool use_cache = !opts->no_cache;
    pthread_mutex_unlock(&cache_lock);

    void *code = NULL;
    size_t bytes = 0;
    if (use_cache) {
        int found = cache_read(key, ptx, &code, &bytes);
        pthread_mutex_lock(&cache_lock);
        if (found == 1)
            cache.hits++;
        else
            cache.misses++;
        if (found < 0)
            cache.rejected++;
        pthread_mutex_unlock(&cache_lock);
        if (found == 1) {
            free(source);
            return module_new(code, bytes, ptx, arch, key, "", true);
        }
    }
    char *log = NULL;
    int rc = run_nvrtc(opts, source, arch, &code, &bytes, &log);
    free(source);
    if (rc) {
        free(log);
        return NULL;
    }
    pthread_mutex_lock(&cache_lock);
    bool writable = cache.writable;
    pthread_mutex_unlock(&cache_lock);
    if (use_cache && writable)
        cache_write(key, ptx, code, bytes);
    spk_module *m = module_new(code, bytes, ptx, arch, key, log, false);
    free(log);
    return m;
}
