/* The core reader (src/core/file.c): what is not a regular file is refused
 * without blocking, reads stop at their limit, messages name the file. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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

int main(void)
{
    snprintf(root, sizeof root, "/tmp/spk-test-file-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(non_files_are_refused_at_once);
    RUN(reads_stop_at_their_limit);
    RUN(descriptor_flags);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return CHECK_SUMMARY();
}
