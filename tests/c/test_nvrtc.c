/* NVRTC compilation and its cache, argument packing, gemm shape checks and
 * the no-device errors: everything in src/cuda that needs no GPU. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "core/error.h"
#include "cuda/runtime.h"

static const char *SAXPY =
    "extern \"C\" __global__ void saxpy(unsigned n, float a, const float *x, float *y)\n"
    "{ unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = SCALE * a * x[i] + y[i]; }\n";

static char tmp_root[256];

/* A fresh cache folder for one test. */
static void use_cache_dir(const char *name, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", tmp_root, name);
    setenv("SPK_CACHE_DIR", out, 1);
    spk_cache_reset();
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int count_entries(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name), slen = strlen(suffix);
        if (len > slen && strcmp(e->d_name + len - slen, suffix) == 0)
            n++;
    }
    closedir(d);
    return n;
}

TEST(sha256_known_vectors)
{
    uint8_t d[32];
    char hex[65];
    spk_sha256("", 0, d);
    for (int i = 0; i < 32; i++)
        sprintf(hex + 2 * i, "%02x", d[i]);
    CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0);
    spk_sha256("abc", 3, d);
    for (int i = 0; i < 32; i++)
        sprintf(hex + 2 * i, "%02x", d[i]);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
    /* 56 bytes: the padding spills into a second block. */
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    spk_sha256(two, strlen(two), d);
    for (int i = 0; i < 32; i++)
        sprintf(hex + 2 * i, "%02x", d[i]);
    CHECK(strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0);
}

/* Every .cu file in kernels/ compiles for sm_80 and sm_90 with its default macros. */
TEST(every_kernel_compiles_for_sm80_and_sm90)
{
    char dir[512];
    use_cache_dir("every-kernel", dir, sizeof dir);
    const char *kdir = spk_kernel_dir();
    DIR *d = opendir(kdir);
    CHECK(d != NULL);
    if (!d)
        return;
    int compiled = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".cu") != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", kdir, e->d_name);
        const char *arches[] = {"sm_80", "sm_90"};
        for (int a = 0; a < 2; a++) {
            spk_compile_options o = {.file = path, .arch = arches[a], .no_cache = true};
            spk_module *m = spk_compile(&o);
            if (!m) {
                fprintf(stderr, "  %s for %s: %s\n", path, arches[a], spk_last_error());
                CHECK(m != NULL);
                continue;
            }
            size_t bytes = 0;
            const uint8_t *code = spk_module_code(m, &bytes);
            /* A cubin is an ELF file. */
            CHECK(bytes > 64 && code[0] == 0x7f && code[1] == 'E' && code[2] == 'L' && code[3] == 'F');
            CHECK(!spk_module_is_ptx(m));
            spk_module_release(m);
            compiled++;
        }
    }
    closedir(d);
    CHECK(compiled >= 4); /* selftest.cu and lstm_recurrence.cu, two arches each */
}

/* The 3xtf32 gemm's two forms as the gemm compiles them: the wgmma form for
 * sm_90a holds the real kernel (for other targets it is a trap, a few KB). */
TEST(gemm_3xtf32_forms_compile)
{
    char dir[512];
    use_cache_dir("gemm-3xtf32", dir, sizeof dir);
    spk_module *mma = spk_gemm_3xtf32_compile("sm_80");
    spk_module *wg = spk_gemm_3xtf32_wgmma_compile();
    CHECK(mma != NULL && wg != NULL);
    if (!mma || !wg) {
        fprintf(stderr, "  %s\n", spk_last_error());
    } else {
        size_t mma_bytes = 0, wg_bytes = 0;
        spk_module_code(mma, &mma_bytes);
        spk_module_code(wg, &wg_bytes);
        CHECK(strcmp(spk_module_arch(wg), "sm_90a") == 0);
        CHECK(wg_bytes > 32768 && mma_bytes > 32768);
    }
    spk_module_release(mma);
    spk_module_release(wg);
}

TEST(compute_arch_gives_ptx_for_that_target)
{
    char dir[512];
    use_cache_dir("ptx", dir, sizeof dir);
    spk_define defs[] = {{"SCALE", "2.0f"}};
    spk_compile_options o = {.source = SAXPY, .defines = defs, .ndefines = 1, .arch = "compute_90"};
    spk_module *m = spk_compile(&o);
    CHECK(m != NULL);
    if (!m)
        return;
    size_t bytes;
    const char *ptx = spk_module_code(m, &bytes);
    CHECK(spk_module_is_ptx(m));
    CHECK_STR_CONTAINS(ptx, ".target sm_90");
    CHECK_STR_CONTAINS(ptx, ".entry saxpy");
    CHECK(strcmp(spk_module_arch(m), "compute_90") == 0);
    spk_module_release(m);
}

TEST(compile_error_carries_nvrtc_log)
{
    char dir[512];
    use_cache_dir("errors", dir, sizeof dir);
    spk_compile_options o = {.source = "extern \"C\" __global__ void k() { undeclared_thing = 1; }\n",
                             .arch = "sm_90"};
    CHECK(spk_compile(&o) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "undeclared_thing");
    CHECK_STR_CONTAINS(spk_last_error(), "NVRTC_ERROR_COMPILATION");
    /* A missing define is a compile error too (SCALE is not defined). */
    spk_compile_options o2 = {.source = SAXPY, .arch = "sm_90"};
    CHECK(spk_compile(&o2) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "SCALE");
    spk_compile_options bad_arch = {.source = SAXPY, .arch = "sm90"};
    CHECK(spk_compile(&bad_arch) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "sm_XY");
    spk_compile_options missing = {.file = "/nonexistent/kernel.cu", .arch = "sm_90"};
    CHECK(spk_compile(&missing) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "/nonexistent/kernel.cu");
}

TEST(include_from_kernel_dir_and_toolkit)
{
    char dir[512];
    use_cache_dir("includes", dir, sizeof dir);
    /* selftest.cuh is found through the kernel folder, cooperative_groups.h
     * through the toolkit's include folders. */
    spk_compile_options o = {
        .source = "#include <cooperative_groups.h>\n#include \"selftest.cuh\"\n"
                  "extern \"C\" __global__ void k(float *y) { cooperative_groups::this_grid().sync();"
                  " y[0] = spk_selftest_axpy(2.f, 3.f, 1.f); }\n",
        .arch = "sm_80"};
    spk_module *m = spk_compile(&o);
    if (!m)
        fprintf(stderr, "  %s\n", spk_last_error());
    CHECK(m != NULL);
    spk_module_release(m);
}

TEST(cache_key_depends_on_every_input)
{
    char dir[512];
    use_cache_dir("keys", dir, sizeof dir);
    char inc_dir[600], inc[700], main_path[700];
    snprintf(inc_dir, sizeof inc_dir, "%s/src", tmp_root);
    mkdir(inc_dir, 0755);
    snprintf(inc, sizeof inc, "%s/helper.cuh", inc_dir);
    snprintf(main_path, sizeof main_path, "%s/main.cu", inc_dir);
    write_text(inc, "#define HELPER 1\n");
    write_text(main_path, "#include \"helper.cuh\"\nextern \"C\" __global__ void k(int *x) { x[0] = HELPER; }\n");

    spk_define d1[] = {{"SCALE", "1.0f"}}, d2[] = {{"SCALE", "2.0f"}}, d3[] = {{"SCALE2", "1.0f"}};
    const char *opt1[] = {"-lineinfo"}, *opt2[] = {"-G"};
    char base[65], k[65];
    spk_compile_options o = {.source = SAXPY, .defines = d1, .ndefines = 1, .arch = "sm_90"};
    CHECK(spk_compile_key(&o, base) == 0);
    CHECK(strlen(base) == 64);
    CHECK(spk_compile_key(&o, k) == 0 && strcmp(k, base) == 0); /* deterministic */
    o.defines = d2;
    CHECK(spk_compile_key(&o, k) == 0 && strcmp(k, base) != 0); /* define value */
    o.defines = d3;
    CHECK(spk_compile_key(&o, k) == 0 && strcmp(k, base) != 0); /* define name */
    o.defines = d1;
    o.options = opt1;
    o.noptions = 1;
    CHECK(spk_compile_key(&o, k) == 0 && strcmp(k, base) != 0); /* option */
    char with_opt1[65];
    snprintf(with_opt1, sizeof with_opt1, "%s", k);
    o.options = opt2;
    CHECK(spk_compile_key(&o, k) == 0 && strcmp(k, with_opt1) != 0 && strcmp(k, base) != 0);
    o.noptions = 0;
    o.arch = "sm_80";
    CHECK(spk_compile_key(&o, k) == 0 && strcmp(k, base) != 0); /* arch */
    o.arch = "compute_90";
    CHECK(spk_compile_key(&o, k) == 0 && strcmp(k, base) != 0); /* PTX vs cubin */
    o.arch = "sm_90";
    o.source = "extern \"C\" __global__ void k() {}\n";
    CHECK(spk_compile_key(&o, k) == 0 && strcmp(k, base) != 0); /* source */

    /* An included file's content changes the key though the source does not. */
    spk_compile_options f = {.file = main_path, .arch = "sm_90"};
    char before[65], after[65];
    CHECK(spk_compile_key(&f, before) == 0);
    write_text(inc, "#define HELPER 2\n");
    CHECK(spk_compile_key(&f, after) == 0);
    CHECK(strcmp(before, after) != 0);
    /* And a nested include too. */
    char nested[700];
    snprintf(nested, sizeof nested, "%s/nested.cuh", inc_dir);
    write_text(nested, "#define NESTED 1\n");
    write_text(inc, "#include \"nested.cuh\"\n#define HELPER NESTED\n");
    CHECK(spk_compile_key(&f, before) == 0);
    write_text(nested, "#define NESTED 3\n");
    CHECK(spk_compile_key(&f, after) == 0);
    CHECK(strcmp(before, after) != 0);
    spk_module *m = spk_compile(&f);
    CHECK(m != NULL);
    spk_module_release(m);
}

TEST(cache_hits_then_recompiles_corrupt_entries)
{
    char dir[512];
    use_cache_dir("hits", dir, sizeof dir);
    spk_define defs[] = {{"SCALE", "3.0f"}};
    spk_compile_options o = {.source = SAXPY, .defines = defs, .ndefines = 1, .arch = "sm_90"};
    spk_cache_info info;
    spk_module *first = spk_compile(&o);
    CHECK(first != NULL);
    if (!first)
        return;
    CHECK(!spk_module_from_cache(first));
    spk_cache_get_info(&info);
    CHECK(info.misses == 1 && info.hits == 0 && info.entries == 1 && info.writable);
    CHECK(strcmp(info.dir, dir) == 0);
    CHECK(info.bytes > 56);

    spk_module *second = spk_compile(&o);
    CHECK(second && spk_module_from_cache(second));
    size_t b1, b2;
    const void *c1 = spk_module_code(first, &b1), *c2 = second ? spk_module_code(second, &b2) : NULL;
    CHECK(c2 && b1 == b2 && memcmp(c1, c2, b1) == 0);
    spk_cache_get_info(&info);
    CHECK(info.hits == 1 && info.misses == 1);
    spk_module_release(second);

    /* Flip one payload byte: checksum mismatch -> recompile and rewrite. */
    char path[700];
    snprintf(path, sizeof path, "%s/%s.bin", dir, spk_module_key(first));
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (f) {
        fseek(f, 100, SEEK_SET);
        int c = fgetc(f);
        fseek(f, 100, SEEK_SET);
        fputc(c ^ 0xff, f);
        fclose(f);
    }
    spk_module *third = spk_compile(&o);
    CHECK(third && !spk_module_from_cache(third));
    spk_cache_get_info(&info);
    CHECK(info.rejected == 1);
    spk_module_release(third);
    spk_module *fourth = spk_compile(&o);
    CHECK(fourth && spk_module_from_cache(fourth)); /* the rewrite is valid */
    spk_module_release(fourth);

    /* Truncate it: same. */
    CHECK(truncate(path, 30) == 0);
    spk_module *fifth = spk_compile(&o);
    CHECK(fifth && !spk_module_from_cache(fifth));
    spk_module_release(fifth);
    spk_cache_get_info(&info);
    CHECK(info.rejected == 2);

    CHECK(spk_cache_clear() == 0);
    spk_cache_get_info(&info);
    CHECK(info.entries == 0 && info.bytes == 0);
    spk_module_release(first);
}

/* Two processes compile the same kernel into one empty folder at once: both
 * succeed, one valid entry remains, no temporary file is left behind. */
TEST(cache_concurrent_writers)
{
    char dir[512];
    use_cache_dir("concurrent", dir, sizeof dir);
    spk_define defs[] = {{"SCALE", "4.0f"}};
    spk_compile_options o = {.source = SAXPY, .defines = defs, .ndefines = 1, .arch = "sm_90"};
    pid_t pids[2];
    for (int i = 0; i < 2; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            spk_module *m = spk_compile(&o);
            _exit(m ? 0 : 1);
        }
    }
    for (int i = 0; i < 2; i++) {
        int status = -1;
        waitpid(pids[i], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    CHECK(count_entries(dir, ".bin") == 1);
    DIR *d = opendir(dir);
    int temps = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        temps += strstr(e->d_name, ".tmp.") != NULL || strstr(e->d_name, ".spk-tmp-") != NULL;
    if (d)
        closedir(d);
    CHECK(temps == 0);
    spk_module *m = spk_compile(&o);
    CHECK(m && spk_module_from_cache(m)); /* the entry they left is valid */
    spk_module_release(m);
}

/* A cache folder that cannot be created: compiles still work, one warning. */
TEST(unwritable_cache_warns_once)
{
    char blocker[512], dir[600];
    snprintf(blocker, sizeof blocker, "%s/a-file", tmp_root);
    write_text(blocker, "not a folder\n");
    snprintf(dir, sizeof dir, "%s/cache", blocker);
    setenv("SPK_CACHE_DIR", dir, 1);
    spk_cache_reset();

    char log[600];
    snprintf(log, sizeof log, "%s/stderr.txt", tmp_root);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    spk_define d1[] = {{"SCALE", "5.0f"}}, d2[] = {{"SCALE", "6.0f"}};
    spk_compile_options o = {.source = SAXPY, .defines = d1, .ndefines = 1, .arch = "sm_90"};
    spk_module *a = spk_compile(&o);
    spk_module *b = spk_compile(&o);
    o.defines = d2;
    spk_module *c = spk_compile(&o);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);

    CHECK(a && b && c);
    CHECK(b && !spk_module_from_cache(b));
    spk_module_release(a);
    spk_module_release(b);
    spk_module_release(c);
    FILE *f = fopen(log, "r");
    int warnings = 0;
    char line[1024];
    while (f && fgets(line, sizeof line, f))
        warnings += strstr(line, "spk: warning: kernel cache") != NULL;
    if (f)
        fclose(f);
    CHECK(warnings == 1);
    spk_cache_info info;
    spk_cache_get_info(&info);
    CHECK(!info.writable);
}

/* Runs fn with stderr going to a file; returns how many lines of it contain
 * `needle` (the warning's text). */
static int count_stderr(void (*fn)(void *), void *ctx, const char *needle, char *last, size_t last_size)
{
    char log[600];
    snprintf(log, sizeof log, "%s/stderr-%d.txt", tmp_root, (int)getpid());
    fflush(stderr);
    int saved = dup(2);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    fn(ctx);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(log, "r");
    int n = 0;
    char line[2048];
    if (last)
        last[0] = '\0';
    while (f && fgets(line, sizeof line, f)) {
        if (strstr(line, needle)) {
            n++;
            if (last)
                snprintf(last, last_size, "%s", line);
        }
    }
    if (f)
        fclose(f);
    unlink(log);
    return n;
}

typedef struct compile_run {
    spk_compile_options o;
    spk_module *m[2];
} compile_run;

static void compile_twice(void *ctx)
{
    compile_run *r = ctx;
    r->m[0] = spk_compile(&r->o);
    r->m[1] = spk_compile(&r->o);
}

/* cache_clear removes the cache's entries and temporary files and nothing
 * else; cache_info counts only entries. */
TEST(cache_touches_only_its_own_files)
{
    char dir[512], path[900];
    use_cache_dir("own-files", dir, sizeof dir);
    spk_define defs[] = {{"SCALE", "7.0f"}};
    spk_compile_options o = {.source = SAXPY, .defines = defs, .ndefines = 1, .arch = "sm_90"};
    spk_module *m = spk_compile(&o);
    CHECK(m != NULL);
    if (!m)
        return;
    const char *key = spk_module_key(m);
    const char *foreign[] = {"firmware.bin", "notes.txt", "0123.bin",
                             /* a cache-like name without the cache's header */
                             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.bin"};
    for (size_t i = 0; i < sizeof foreign / sizeof *foreign; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, foreign[i]);
        write_text(path, "the user's own bytes\n");
    }
    snprintf(path, sizeof path, "%s/%s.bin.tmp.123.abc", dir, key); /* an earlier writer's leftover */
    write_text(path, "");
    snprintf(path, sizeof path, "%s/.%s.bin.spk-tmp-123-4", dir, key); /* the writer's (core/file.h) */
    write_text(path, "");
    spk_cache_info info;
    spk_cache_get_info(&info);
    CHECK(info.entries == 1);
    CHECK(spk_cache_clear() == 0);
    for (size_t i = 0; i < sizeof foreign / sizeof *foreign; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, foreign[i]);
        CHECK(access(path, F_OK) == 0);
    }
    snprintf(path, sizeof path, "%s/%s.bin", dir, key);
    CHECK(access(path, F_OK) != 0);
    snprintf(path, sizeof path, "%s/%s.bin.tmp.123.abc", dir, key);
    CHECK(access(path, F_OK) != 0);
    snprintf(path, sizeof path, "%s/.%s.bin.spk-tmp-123-4", dir, key);
    CHECK(access(path, F_OK) != 0);
    spk_module_release(m);
}

/* A folder the cache makes is private; a folder others can write, or that
 * another user owns, is refused with one warning, and compiles go on
 * without reading or writing it. */
TEST(cache_folder_must_be_private)
{
    char dir[512];
    use_cache_dir("private/made/here", dir, sizeof dir);
    spk_cache_info info;
    spk_cache_get_info(&info);
    struct stat st;
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
    char parent[600];
    snprintf(parent, sizeof parent, "%s/private/made", tmp_root);
    CHECK(stat(parent, &st) == 0 && (st.st_mode & 0777) == 0700);

    const char *modes[] = {"others", "group"};
    for (int i = 0; i < 2; i++) {
        char shared[512];
        snprintf(shared, sizeof shared, "%s/shared-%s", tmp_root, modes[i]);
        mkdir(shared, 0700);
        chmod(shared, i == 0 ? 0777 : 0770);
        setenv("SPK_CACHE_DIR", shared, 1);
        spk_cache_reset();
        spk_define defs[] = {{"SCALE", "8.0f"}};
        compile_run r = {.o = {.source = SAXPY, .defines = defs, .ndefines = 1, .arch = "sm_90"}};
        char last[2048];
        int warnings = count_stderr(compile_twice, &r, "spk: warning: kernel cache", last, sizeof last);
        CHECK(warnings == 1);
        CHECK_STR_CONTAINS(last, "is not safe: it can be written by");
        CHECK(r.m[0] && r.m[1] && !spk_module_from_cache(r.m[1]));
        CHECK(count_entries(shared, ".bin") == 0);
        spk_cache_get_info(&info);
        CHECK(!info.writable && info.entries == 0);
        CHECK(spk_cache_clear() == -1);
        CHECK_STR_CONTAINS(spk_last_error(), "is not in use");
        spk_module_release(r.m[0]);
        spk_module_release(r.m[1]);
    }

    /* Owned by someone else: as root, a folder given to another uid; as
     * another user, the root-owned filesystem root. */
    char other[512];
    if (geteuid() == 0) {
        snprintf(other, sizeof other, "%s/someone-else", tmp_root);
        mkdir(other, 0700);
        CHECK(chown(other, 65534, 65534) == 0);
    } else {
        snprintf(other, sizeof other, "/");
    }
    setenv("SPK_CACHE_DIR", other, 1);
    spk_cache_reset();
    spk_define defs[] = {{"SCALE", "9.0f"}};
    compile_run r = {.o = {.source = SAXPY, .defines = defs, .ndefines = 1, .arch = "sm_90"}};
    char last[2048];
    CHECK(count_stderr(compile_twice, &r, "spk: warning: kernel cache", last, sizeof last) == 1);
    CHECK_STR_CONTAINS(last, "is owned by uid");
    CHECK(r.m[0] && r.m[1] && !spk_module_from_cache(r.m[1]));
    CHECK(count_entries(other, ".bin") == 0);
    spk_module_release(r.m[0]);
    spk_module_release(r.m[1]);
}

/* With HOME unset the folder is the password database's home, never the
 * shared /tmp/.cache/spk. */
TEST(cache_without_home_is_not_shared)
{
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("HOME");
        unsetenv("XDG_CACHE_HOME");
        unsetenv("SPK_CACHE_DIR");
        spk_cache_reset();
        spk_cache_info info;
        spk_cache_get_info(&info);
        _exit(strncmp(info.dir, "/tmp/.cache", 11) == 0 ? 1 : strstr(info.dir, "/.cache/spk") || strstr(info.dir, "spk-cache-") ? 0 : 2);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void compile_once(void *ctx)
{
    compile_run *r = ctx;
    r->m[0] = spk_compile(&r->o);
}

/* A folder path too long for PATH_MAX: a warning, no cache, and nothing
 * written to the current folder; a long path that fits works, entries and
 * all (they are reached relative to the folder). */
TEST(cache_folder_near_path_max)
{
    char cwd[PATH_MAX];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    char work[600];
    snprintf(work, sizeof work, "%s/cwd", tmp_root);
    mkdir(work, 0700);
    CHECK(chdir(work) == 0);
    char *long_dir = malloc(PATH_MAX + 512);
    int n = snprintf(long_dir, PATH_MAX + 512, "%s", tmp_root);
    while (n < PATH_MAX + 100)
        n += snprintf(long_dir + n, (size_t)(PATH_MAX + 512 - n), "/%0200d", 0);
    spk_cache_set_dir(long_dir);
    spk_define defs[] = {{"SCALE", "10.0f"}};
    compile_run r = {.o = {.source = SAXPY, .defines = defs, .ndefines = 1, .arch = "sm_90"}};
    char last[2048];
    CHECK(count_stderr(compile_once, &r, "spk: warning: kernel cache", last, sizeof last) == 1);
    CHECK_STR_CONTAINS(last, "path is too long");
    CHECK(r.m[0] != NULL);
    spk_module_release(r.m[0]);
    DIR *d = opendir(work);
    int names = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        names += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d)
        closedir(d);
    CHECK(names == 0); /* no ./.tmp.<pid>.<tid>, no entry */
    spk_cache_info info;
    spk_cache_get_info(&info);
    CHECK(!info.writable);

    /* About 4000 bytes: entry paths would pass PATH_MAX, the folder's does not. */
    n = snprintf(long_dir, PATH_MAX + 512, "%s", tmp_root);
    while (n < PATH_MAX - 300)
        n += snprintf(long_dir + n, (size_t)(PATH_MAX + 512 - n), "/%0200d", 1);
    n += snprintf(long_dir + n, (size_t)(PATH_MAX + 512 - n), "/%0*d", PATH_MAX - 40 - n, 2);
    CHECK(n < PATH_MAX && n + 70 > PATH_MAX);
    spk_cache_set_dir(long_dir);
    spk_module *a = spk_compile(&r.o), *b = spk_compile(&r.o);
    CHECK(a && b && !spk_module_from_cache(a) && spk_module_from_cache(b));
    spk_cache_get_info(&info);
    CHECK(info.writable && info.entries == 1);
    spk_module_release(a);
    spk_module_release(b);
    CHECK(spk_cache_clear() == 0);
    spk_cache_set_dir(NULL);
    CHECK(chdir(cwd) == 0);
    free(long_dir);
}

/* An entry records its key: a valid entry copied to another key's name is
 * refused with a warning and recompiled. */
TEST(cache_entry_is_checked_against_its_key)
{
    char dir[512];
    use_cache_dir("keys", dir, sizeof dir);
    spk_define d1[] = {{"SCALE", "11.0f"}}, d2[] = {{"SCALE", "12.0f"}};
    spk_compile_options a = {.source = SAXPY, .defines = d1, .ndefines = 1, .arch = "sm_90"};
    spk_compile_options b = a;
    b.defines = d2;
    char key_b[65];
    CHECK(spk_compile_key(&b, key_b) == 0);
    spk_module *ma = spk_compile(&a);
    CHECK(ma != NULL);
    if (!ma)
        return;
    char from[900], to[900], cmd[2000];
    snprintf(from, sizeof from, "%s/%s.bin", dir, spk_module_key(ma));
    snprintf(to, sizeof to, "%s/%s.bin", dir, key_b);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    CHECK(system(cmd) == 0);
    compile_run r = {.o = b};
    char last[2048];
    CHECK(count_stderr(compile_once, &r, "was made for another key", last, sizeof last) == 1);
    CHECK(r.m[0] && !spk_module_from_cache(r.m[0]));
    spk_cache_info info;
    spk_cache_get_info(&info);
    CHECK(info.rejected == 1);
    spk_module *again = spk_compile(&b);
    CHECK(again && spk_module_from_cache(again)); /* rewritten for its own key */
    spk_module_release(again);
    spk_module_release(r.m[0]);
    spk_module_release(ma);
}

/* NVRTC options that write or read files, or yield no cubin, are refused
 * before NVRTC runs; the ones that change only the code pass. */
TEST(compile_options_that_touch_files_are_refused)
{
    char dir[512];
    use_cache_dir("options", dir, sizeof dir);
    char time_file[600];
    snprintf(time_file, sizeof time_file, "--time=%s/time.csv", tmp_root);
    const char *refused[] = {time_file, "--create-pch=x.pch", "--pch", "--pch-dir=/tmp", "--use-pch=x.pch",
                             "--fdevice-time-trace=t.json", "--pre-include=x.h", "-include=x.h", "-dlto",
                             "--dlink-time-opt", "--gen-opt-lto", "--optix-ir", "--fdevice-syntax-only", "-rdc=true",
                             "-dc", "--device-c", "-arch=sm_80", "--gpu-architecture=sm_80", "--bogus", "-I",
                             "--ptxas-options=-o", "--ptxas-options=--output-file=x", "-lineinfo=1"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        const char *opt[] = {refused[i]};
        spk_compile_options o = {.source = "extern \"C\" __global__ void k() {}\n", .arch = "sm_90", .options = opt,
                                 .noptions = 1};
        spk_module *m = spk_compile(&o);
        CHECK(m == NULL);
        if (m)
            fprintf(stderr, "  accepted: %s\n", refused[i]);
        CHECK_STR_CONTAINS(spk_last_error(), refused[i]);
        char key[65];
        CHECK(spk_compile_key(&o, key) == -1);
        spk_module_release(m);
    }
    snprintf(time_file, sizeof time_file, "%s/time.csv", tmp_root);
    CHECK(access(time_file, F_OK) != 0);
    const char *accepted[] = {"-lineinfo", "-G", "--ptxas-options=-v", "-Xptxas=--warn-on-spills", "--maxrregcount=64",
                              "--ftz=true", "--use_fast_math", "--std=c++17", "-DX=1", "-UX", "--dopt=on",
                              "--diag-suppress=177", "-w"};
    for (size_t i = 0; i < sizeof accepted / sizeof *accepted; i++) {
        const char *opt[] = {accepted[i]};
        spk_compile_options o = {.source = "extern \"C\" __global__ void k(float *p) { p[0] = 1; }\n", .arch = "sm_90",
                                 .options = opt, .noptions = 1, .no_cache = true};
        spk_module *m = spk_compile(&o);
        CHECK(m != NULL);
        if (!m)
            fprintf(stderr, "  refused: %s: %s\n", accepted[i], spk_last_error());
        spk_module_release(m);
    }
}

/* Sources and includes: a folder, a FIFO, a NUL, a file over 16 MiB, and
 * more included files than the bound, each an error naming the file. */
TEST(sources_and_includes_are_bounded)
{
    char path[600], fifo[600];
    snprintf(path, sizeof path, "%s/with-nul.cu", tmp_root);
    FILE *f = fopen(path, "wb");
    fwrite("extern \"C\" __global__ void k() {}\0junk", 1, 38, f);
    fclose(f);
    spk_compile_options o = {.file = path, .arch = "sm_90", .no_cache = true};
    CHECK(spk_compile(&o) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "with-nul.cu: holds a NUL byte at offset 33");
    o.file = tmp_root;
    CHECK(spk_compile(&o) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "not a regular file (a folder)");
    snprintf(fifo, sizeof fifo, "%s/pipe.cuh", tmp_root);
    CHECK(mkfifo(fifo, 0600) == 0);
    char src[800];
    snprintf(src, sizeof src, "#include \"%s\"\nextern \"C\" __global__ void k() {}\n", fifo);
    spk_compile_options inc = {.source = src, .arch = "sm_90", .no_cache = true};
    CHECK(spk_compile(&inc) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "pipe.cuh: not a regular file (a FIFO)");
    snprintf(path, sizeof path, "%s/big.cuh", tmp_root);
    CHECK(truncate(path, 0) == 0 || (fclose(fopen(path, "w")), 1));
    CHECK(truncate(path, (off_t)17 << 20) == 0);
    snprintf(src, sizeof src, "#include \"%s\"\n", path);
    CHECK(spk_compile(&inc) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "big.cuh: larger than the 16 MiB limit for an included file");
    /* 300 distinct files included: more than the bound of 256. */
    char *many = malloc(300 * 700);
    size_t at = 0;
    for (int i = 0; i < 300; i++) {
        char name[700];
        snprintf(name, sizeof name, "%s/part%d.cuh", tmp_root, i);
        write_text(name, "\n");
        at += (size_t)snprintf(many + at, 300 * 700 - at, "#include \"%s\"\n", name);
    }
    inc.source = many;
    CHECK(spk_compile(&inc) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "more than 256 files included");
    free(many);
    /* 2 MiB of unterminated "#include <" lines: the scan stays linear. */
    size_t big = (size_t)2 << 20;
    char *lines = malloc(big + 1);
    for (size_t i = 0; i < big; i += 11)
        memcpy(lines + i, "#include <\n", i + 11 <= big ? 11 : big - i);
    lines[big] = '\0';
    spk_compile_options scan = {.source = lines, .arch = "sm_90"};
    char key[65];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(spk_compile_key(&scan, key) == 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec) < 2.0);
    free(lines);
}

TEST(pack_args_checks_count_and_sizes)
{
    spk_arg args[4] = {{.kind = SPK_ARG_U32, .v.u32 = 7},
                       {.kind = SPK_ARG_F32, .v.f32 = 2.5f},
                       {.kind = SPK_ARG_PTR, .v.ptr = (void *)0x1000},
                       {.kind = SPK_ARG_F64, .v.f64 = 0.25}};
    size_t sizes[4] = {4, 4, 8, 8};
    void *out[4];
    CHECK(spk_pack_args("saxpy", args, 4, sizes, 4, out) == 0);
    CHECK(*(uint32_t *)out[0] == 7);
    CHECK(*(float *)out[1] == 2.5f);
    CHECK(*(void **)out[2] == (void *)0x1000);
    CHECK(*(double *)out[3] == 0.25);

    CHECK(spk_pack_args("saxpy", args, 3, sizes, 4, out) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel saxpy takes 4 arguments, got 3");
    size_t wrong[4] = {4, 8, 8, 8};
    CHECK(spk_pack_args("saxpy", args, 4, wrong, 4, out) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "argument 2 is f32 (4 bytes), parameter 2 is 8 bytes");
    CHECK(spk_arg_size(SPK_ARG_I64) == 8 && spk_arg_size(SPK_ARG_I32) == 4);
    CHECK(spk_pack_args("none", NULL, 0, NULL, 0, out) == 0);
}

static void no_release(spk_storage *s) { (void)s; }

/* A tensor that claims to live on device 0 (never dereferenced): gemm's
 * checks run before any CUDA call. */
static spk_tensor *fake_device_nd(int ndim, const int64_t *shape, spk_dtype dtype)
{
    static char backing[1 << 16];
    spk_storage *s = spk_storage_wrap(backing, sizeof backing, 0, no_release, NULL);
    spk_tensor *t = spk_tensor_on_storage(s, dtype, ndim, shape);
    spk_storage_release(s);
    return t;
}

static spk_tensor *fake_device(int64_t r, int64_t c, spk_dtype dtype)
{
    return fake_device_nd(2, (int64_t[]){r, c}, dtype);
}

TEST(gemm_checks_shapes_without_a_gpu)
{
    spk_tensor *a = fake_device(2, 3, SPK_F32), *b = fake_device(3, 4, SPK_F32), *c = fake_device(2, 4, SPK_F32);
    int64_t m, n, k;
    spk_gemm_args g = {.a = a, .b = b, .c = c, .alpha = 1, .beta = 0};
    CHECK(spk_gemm_check(&g, &m, &n, &k, NULL) == 0 && m == 2 && n == 4 && k == 3);
    g.transa = true;
    CHECK(spk_gemm_check(&g, &m, &n, &k, NULL) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "op(a) is 3 x 2 and op(b) is 3 x 4");
    g.transa = false;
    spk_tensor *c_bad = fake_device(4, 2, SPK_F32);
    g.c = c_bad;
    CHECK(spk_gemm_check(&g, &m, &n, &k, NULL) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "c is 4 x 2, op(a) op(b) is 2 x 4");
    /* A transposed view of a (3 x 2) is a valid 2 x 3 operand. */
    spk_tensor *a_t_src = fake_device(3, 2, SPK_F32);
    spk_tensor *a_view = spk_tensor_transpose(a_t_src, 0, 1);
    g.a = a_view;
    g.c = c;
    CHECK(spk_gemm_check(&g, &m, &n, &k, NULL) == 0 && m == 2 && k == 3);
    spk_tensor *d64 = fake_device(2, 3, SPK_F64);
    g.a = d64;
    CHECK(spk_gemm_check(&g, &m, &n, &k, NULL) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "a is f64");
    int64_t shape[2] = {2, 3};
    spk_tensor *host = spk_tensor_new(SPK_F32, 2, shape);
    g.a = host;
    CHECK(spk_gemm_check(&g, &m, &n, &k, NULL) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "a is a host tensor");
    spk_math_mode mode;
    CHECK(spk_math_mode_from_name("tf32", &mode) == 0 && mode == SPK_MATH_TF32);
    CHECK(spk_math_mode_from_name("fp16", &mode) == -1);
    spk_tensor_free(a);
    spk_tensor_free(b);
    spk_tensor_free(c);
    spk_tensor_free(c_bad);
    spk_tensor_free(a_t_src);
    spk_tensor_free(a_view);
    spk_tensor_free(d64);
    spk_tensor_free(host);
}

/* A 3-D c is a batch of matrices; a and b are batches of as many or one
 * matrix shared by all. */
TEST(gemm_checks_batches_without_a_gpu)
{
    spk_tensor *a = fake_device(6, 3, SPK_F32);                                  /* shared */
    spk_tensor *b = fake_device_nd(3, (int64_t[]){2, 4, 3}, SPK_F32);            /* [2, n, k], transposed */
    spk_tensor *c = fake_device_nd(3, (int64_t[]){2, 6, 4}, SPK_F32);
    int64_t m, n, k, count = 0;
    spk_gemm_args g = {.a = a, .b = b, .c = c, .transb = true, .alpha = 1, .beta = 0};
    CHECK(spk_gemm_check(&g, &m, &n, &k, &count) == 0 && m == 6 && n == 4 && k == 3 && count == 2);
    /* a 2-D c: count 1 */
    spk_tensor *b2 = fake_device(4, 3, SPK_F32), *c2 = fake_device(6, 4, SPK_F32);
    spk_gemm_args one = {.a = a, .b = b2, .c = c2, .transb = true, .alpha = 1};
    CHECK(spk_gemm_check(&one, &m, &n, &k, &count) == 0 && count == 1);
    /* a batch of b into one c */
    g.c = c2;
    CHECK(spk_gemm_check(&g, &m, &n, &k, &count) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "b is a batch of matrices but c is one matrix; give c as [2, 6, 4]");
    /* counts that differ */
    spk_tensor *c3 = fake_device_nd(3, (int64_t[]){3, 6, 4}, SPK_F32);
    g.c = c3;
    CHECK(spk_gemm_check(&g, &m, &n, &k, &count) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "c holds 3 matrices but b holds 2");
    /* matrices of c that share elements: 8 apart, each 24 long */
    spk_tensor *c_overlap = fake_device_nd(3, (int64_t[]){2, 6, 4}, SPK_F32);
    c_overlap->strides[0] = 8;
    g.c = c_overlap;
    CHECK(spk_gemm_check(&g, &m, &n, &k, &count) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "the matrices of c overlap (stride 8 between matrices of 6 rows x 4)");
    /* a 4-D operand */
    spk_tensor *a4 = fake_device_nd(4, (int64_t[]){1, 2, 6, 3}, SPK_F32);
    g.a = a4;
    g.c = c;
    CHECK(spk_gemm_check(&g, &m, &n, &k, &count) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "a has 4 dimensions, gemm needs 2 (a matrix) or 3 (a batch of them)");
    spk_tensor_free(a4);
    spk_tensor_free(c_overlap);
    spk_tensor_free(c3);
    spk_tensor_free(b2);
    spk_tensor_free(c2);
    spk_tensor_free(a);
    spk_tensor_free(b);
    spk_tensor_free(c);
}

/* Without a driver or device every GPU call fails with the same message and
 * nothing crashes; with one, the calls work. */
TEST(no_device_errors_are_clear)
{
    spk_cuda_info info;
    spk_cuda_get_info(&info);
    CHECK(info.runtime_version >= 13000);
    CHECK(info.nvrtc_major >= 13);
    if (spk_cuda_available()) {
        CHECK(info.device_count > 0 && info.error[0] == '\0');
        spk_stream *s = spk_stream_new();
        CHECK(s != NULL);
        spk_stream_release(s);
        return;
    }
    CHECK(info.device_count == 0);
    CHECK_STR_CONTAINS(info.error, "spk.cuda: no CUDA device (cudaGetDeviceCount: ");
    CHECK(spk_cuda_require() == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "spk.cuda: no CUDA device");
    CHECK(spk_stream_new() == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "spk.cuda: no CUDA device");
    CHECK(spk_event_new(true) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "spk.cuda: no CUDA device");
    CHECK(spk_device_storage_new(16, NULL) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "spk.cuda: no CUDA device");
    spk_device_props p;
    CHECK(spk_device_props_get(0, &p) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "spk.cuda: no CUDA device");
    /* Compiling for the current device needs one; for a given arch it does not. */
    spk_compile_options o = {.source = "extern \"C\" __global__ void k() {}\n", .no_cache = true};
    CHECK(spk_compile(&o) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "no CUDA device");
    o.arch = "sm_90";
    spk_module *m = spk_compile(&o);
    CHECK(m != NULL);
    if (m) {
        CHECK(spk_module_kernel(m, "k") == NULL);
        CHECK_STR_CONTAINS(spk_last_error(), "spk.cuda: no CUDA device");
    }
    spk_module_release(m);
}

int main(void)
{
    snprintf(tmp_root, sizeof tmp_root, "%s", check_scratch_dir("test-nvrtc"));
    RUN(sha256_known_vectors);
    RUN(every_kernel_compiles_for_sm80_and_sm90);
    RUN(gemm_3xtf32_forms_compile);
    RUN(compute_arch_gives_ptx_for_that_target);
    RUN(compile_error_carries_nvrtc_log);
    RUN(include_from_kernel_dir_and_toolkit);
    RUN(cache_key_depends_on_every_input);
    RUN(cache_hits_then_recompiles_corrupt_entries);
    RUN(cache_concurrent_writers);
    RUN(unwritable_cache_warns_once);
    RUN(cache_touches_only_its_own_files);
    RUN(cache_folder_must_be_private);
    RUN(cache_without_home_is_not_shared);
    RUN(cache_folder_near_path_max);
    RUN(cache_entry_is_checked_against_its_key);
    RUN(compile_options_that_touch_files_are_refused);
    RUN(sources_and_includes_are_bounded);
    RUN(pack_args_checks_count_and_sizes);
    RUN(gemm_checks_shapes_without_a_gpu);
    RUN(gemm_checks_batches_without_a_gpu);
    RUN(no_device_errors_are_clear);
    return CHECK_SUMMARY();
}
