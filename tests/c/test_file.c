/* The core reader and writer (src/core/file.c): what is not a regular file
 * is refused without blocking, reads stop at their limit, a failed write
 * leaves the previous file, messages name the file. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "core/error.h"
#include "core/file.h"
#include "core/npy.h"
#include "core/safetensors.h"

static char root[256];

static const char *at(const char *name)
{
    static char buf[16][512];
    static int i;
    i = (i + 1) % 16;
    snprintf(buf[i], sizeof buf[i], "%s/%s", root, name);
    return buf[i];
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Each kind of non-file, reached directly and through a link, is refused at
 * once by every entry point of the reader, and by the .npy and .safetensors
 * loaders on top of it. */
TEST(non_files_are_refused_at_once)
{
    CHECK(mkfifo(at("fifo"), 0600) == 0);
    CHECK(symlink(at("fifo"), at("fifo-link")) == 0);
    CHECK(symlink("/dev/zero", at("zero-link")) == 0);
    CHECK(mkdir(at("folder"), 0700) == 0);
    int sock = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", at("socket"));
    CHECK(sock >= 0 && bind(sock, (struct sockaddr *)&addr, sizeof addr) == 0);
    struct {
        const char *path, *kind;
    } cases[] = {
        {at("fifo"), "a FIFO"}, {at("fifo-link"), "a FIFO"}, {at("zero-link"), "a character device"},
        {"/dev/null", "a character device"}, {at("folder"), "a folder"}, {at("socket"), "a socket"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char want[700];
        snprintf(want, sizeof want, "%s: not a regular file (%s)", cases[i].path, cases[i].kind);
        double t0 = now_s();
        CHECK(spk_file_open(cases[i].path, NULL) == -1);
        CHECK_STR_CONTAINS(spk_last_error(), want);
        CHECK(spk_file_fopen(cases[i].path, NULL) == NULL);
        CHECK_STR_CONTAINS(spk_last_error(), want);
        size_t len;
        CHECK(spk_file_read(cases[i].path, 100, "a test", &len) == NULL);
        CHECK_STR_CONTAINS(spk_last_error(), want);
        CHECK(spk_npy_load(cases[i].path) == NULL);
        CHECK_STR_CONTAINS(spk_last_error(), want);
        spk_tensor_list l = {0};
        CHECK(spk_safetensors_load(cases[i].path, &l) == -1 && l.count == 0);
        CHECK_STR_CONTAINS(spk_last_error(), want);
        CHECK(now_s() - t0 < 2.0);
    }
    close(sock);
    CHECK(spk_file_open(at("missing"), NULL) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "missing: cannot open: No such file or directory");
}

TEST(reads_stop_at_their_limit)
{
    char data[100];
    for (int i = 0; i < 100; i++)
        data[i] = (char)('a' + i % 26);
    write_bytes(at("hundred"), data, 100);
    size_t len = 0;
    char *text = spk_file_read(at("hundred"), 100, "a test", &len);
    CHECK(text && len == 100 && memcmp(text, data, 100) == 0 && text[100] == '\0');
    free(text);
    CHECK(spk_file_read(at("hundred"), 99, "a test file", &len) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "hundred: larger than the 99 bytes limit for a test file");
    write_bytes(at("empty"), "", 0);
    text = spk_file_read(at("empty"), 10, NULL, &len);
    CHECK(text && len == 0 && text[0] == '\0');
    free(text);
    /* A sparse 3 MiB file against a 2 MiB limit: refused, not read whole. */
    write_bytes(at("sparse"), "", 0);
    CHECK(truncate(at("sparse"), 3 << 20) == 0);
    CHECK(spk_file_read(at("sparse"), (size_t)2 << 20, "a kernel source", &len) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "sparse: larger than the 2 MiB limit for a kernel source");
    /* /proc files are regular but report size 0: read to their end. */
    text = spk_file_read("/proc/self/status", 1 << 20, NULL, &len);
    CHECK(text && len > 0 && strstr(text, "Pid:") != NULL);
    free(text);
}

/* A descriptor from the reader is in blocking mode and closed on exec. */
TEST(descriptor_flags)
{
    write_bytes(at("plain"), "x", 1);
    struct stat st;
    int fd = spk_file_open(at("plain"), &st);
    CHECK(fd >= 0 && st.st_size == 1);
    if (fd >= 0) {
        CHECK((fcntl(fd, F_GETFL) & O_NONBLOCK) == 0);
        CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
        close(fd);
    }
}

/* ---- the writer ---- */

static char *slurp(const char *path, size_t *len)
{
    return spk_file_read(path, 1 << 24, NULL, len);
}

/* The names in the test folder's `sub` other than `keep`: what a writer left. */
static int leftovers(const char *sub, const char *keep)
{
    DIR *d = opendir(at(sub));
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && strcmp(e->d_name, keep) != 0;
    if (d)
        closedir(d);
    return n;
}

/* A write that fails part-way (here the file-size limit, as a full disk
 * would) leaves the previous file whole and no temporary file; the same for
 * every writer of the core (npy, safetensors, ONNX, the plain helper). */
TEST(failed_writes_keep_the_previous_file)
{
    CHECK(mkdir(at("full"), 0700) == 0);
    int64_t n = 1 << 18; /* 1 MiB of f32 */
    spk_tensor *t = spk_tensor_full(SPK_F32, 1, &n, 1.5);
    const char *targets[] = {"full/t.npy", "full/t.safetensors", "full/plain.bin"};
    for (int i = 0; i < 3; i++) {
        write_bytes(at(targets[i]), "good", 4);
        CHECK(chmod(at(targets[i]), 0640) == 0);
        pid_t pid = fork();
        if (pid == 0) {
            signal(SIGXFSZ, SIG_IGN);
            struct rlimit lim = {64 << 10, 64 << 10}; /* 64 KiB: the write fails with EFBIG */
            setrlimit(RLIMIT_FSIZE, &lim);
            int rc;
            if (i == 0) {
                rc = spk_npy_save(at(targets[i]), t);
            } else if (i == 1) {
                spk_named_tensor item = {"t", t};
                spk_tensor_list list = {1, &item};
                rc = spk_safetensors_save(at(targets[i]), &list);
            } else {
                rc = spk_file_write(at(targets[i]), spk_tensor_data(t), (size_t)n * 4);
            }
            const char *msg = spk_last_error();
            _exit(rc == -1 && strstr(msg, "write failed: File too large (the file is unchanged)") ? 0 : 1);
        }
        int status = -1;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        size_t len = 0;
        char *text = slurp(at(targets[i]), &len);
        CHECK(text && len == 4 && memcmp(text, "good", 4) == 0);
        free(text);
        struct stat st;
        CHECK(stat(at(targets[i]), &st) == 0 && (st.st_mode & 0777) == 0640);
    }
    CHECK(leftovers("full", "t.npy") == 2); /* the other two targets, no temporary file */
    /* the same writes, unlimited: replace the file, keep its permissions */
    CHECK(spk_npy_save(at("full/t.npy"), t) == 0);
    struct stat st;
    CHECK(stat(at("full/t.npy"), &st) == 0 && st.st_size > (off_t)(n * 4) && (st.st_mode & 0777) == 0640);
    CHECK(leftovers("full", "t.npy") == 2);
    spk_tensor_free(t);
}

/* What is not a regular file is refused at once and left as it was: a FIFO
 * (no reader needed: the write does not block), a folder, a device. */
TEST(writes_refuse_non_files)
{
    CHECK(mkdir(at("odd"), 0700) == 0);
    CHECK(mkfifo(at("odd/fifo"), 0600) == 0);
    CHECK(mkdir(at("odd/folder"), 0700) == 0);
    double t0 = now_s();
    CHECK(spk_file_write(at("odd/fifo"), "x", 1) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "odd/fifo: not a regular file (a FIFO); spk writes only regular files");
    CHECK(now_s() - t0 < 5);
    int64_t four = 4;
    spk_tensor *t = spk_tensor_new(SPK_F32, 1, &four);
    CHECK(spk_npy_save(at("odd/fifo"), t) == -1);
    CHECK(spk_npy_save(at("odd/folder"), t) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "odd/folder: not a regular file (a folder)");
    CHECK(spk_npy_save("/dev/null", t) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "/dev/null: not a regular file (a character device)");
    spk_tensor_free(t);
    struct stat st;
    CHECK(stat(at("odd/fifo"), &st) == 0 && S_ISFIFO(st.st_mode));
    CHECK(stat(at("odd/folder"), &st) == 0 && S_ISDIR(st.st_mode));
    CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));
    CHECK(leftovers("odd", "fifo") == 1); /* the folder; nothing else was made */
    CHECK(spk_file_write(at("no/such/folder/x"), "x", 1) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "no/such/folder/x: cannot create: No such file or directory");
}

/* A link is followed: the file it names is replaced and the link stays; a
 * dangling link is refused. */
TEST(writes_follow_links)
{
    CHECK(mkdir(at("links"), 0700) == 0 && mkdir(at("links/real"), 0700) == 0);
    write_bytes(at("links/real/data"), "old", 3);
    CHECK(symlink("real/data", at("links/link")) == 0);
    CHECK(spk_file_write(at("links/link"), "new!", 4) == 0);
    struct stat st;
    CHECK(lstat(at("links/link"), &st) == 0 && S_ISLNK(st.st_mode));
    size_t len;
    char *text = slurp(at("links/real/data"), &len);
    CHECK(text && len == 4 && memcmp(text, "new!", 4) == 0);
    free(text);
    CHECK(leftovers("links/real", "data") == 0);
    CHECK(symlink("real/missing/x", at("links/dangling")) == 0);
    CHECK(spk_file_write(at("links/dangling"), "x", 1) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "links/dangling: a symbolic link to nothing that can be written");
    /* a temporary name of the writer is recognised, others are not */
    CHECK(spk_file_is_temporary(".t.npy.spk-tmp-12-3", "t.npy"));
    CHECK(!spk_file_is_temporary(".t.npy.spk-tmp-12-", "t.npy"));
    CHECK(!spk_file_is_temporary("t.npy.spk-tmp-12-3", "t.npy"));
    CHECK(!spk_file_is_temporary(".u.npy.spk-tmp-12-3", "t.npy"));
}

int main(void)
{
    snprintf(root, sizeof root, "%s", check_scratch_dir("test-file"));
    RUN(non_files_are_refused_at_once);
    RUN(reads_stop_at_their_limit);
    RUN(descriptor_flags);
    RUN(failed_writes_keep_the_previous_file);
    RUN(writes_refuse_non_files);
    RUN(writes_follow_links);
    return CHECK_SUMMARY();
}
