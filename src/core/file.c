#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

const char *spk_file_kind(mode_t mode)
{
    if (S_ISREG(mode))
        return "a regular file";
    if (S_ISDIR(mode))
        return "a folder";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISLNK(mode))
        return "a symbolic link";
    return "not a file";
}

void spk_file_size_words(size_t bytes, char *out, size_t size)
{
    if (bytes >= ((size_t)1 << 20) && bytes % ((size_t)1 << 20) == 0)
        snprintf(out, size, "%zu MiB", bytes >> 20);
    else if (bytes >= 1024 && bytes % 1024 == 0)
        snprintf(out, size, "%zu KiB", bytes >> 10);
    else
        snprintf(out, size, "%zu bytes", bytes);
}

int spk_file_openat(int dir, const char *path, const char *shown, struct stat *st)
{
    if (!shown)
        shown = path;
    struct stat s;
    /* The path first: a device or FIFO is refused without being opened (an
     * open can have side effects on a device). The descriptor is checked
     * again below, as the path can change in between. */
    if (fstatat(dir, path, &s, 0) == 0 && !S_ISREG(s.st_mode))
        return spk_fail("%s: not a regular file (%s)", shown, spk_file_kind(s.st_mode));
    int fd = openat(dir, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return spk_fail("%s: cannot open: %s", shown, strerror(errno));
    if (fstat(fd, &s) != 0) {
        int err = errno;
        close(fd);
        return spk_fail("%s: cannot read its status: %s", shown, strerror(err));
    }
    if (!S_ISREG(s.st_mode)) {
        close(fd);
        return spk_fail("%s: not a regular file (%s)", shown, spk_file_kind(s.st_mode));
    }
    /* Regular files never block; reads are plain from here on. */
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    if (st)
        *st = s;
    return fd;
}

int spk_file_open(const char *path, struct stat *st)
{
    return spk_file_openat(AT_FDCWD, path, NULL, st);
}

FILE *spk_file_fopen(const char *path, struct stat *st)
{
    int fd = spk_file_open(path, st);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int err = errno;
        close(fd);
        return spk_fail_null("%s: cannot open: %s", path, strerror(err));
    }
    return f;
}

char *spk_file_read_fd(int fd, const char *name, size_t limit, const char *what, size_t *len)
{
    /* The status size is a first guess (one byte more, so that the end of
     * file is seen without growing); the loop reads to the end of the file. */
    struct stat s;
    size_t cap = 4096;
    char words[32];
    if (fstat(fd, &s) == 0 && s.st_size > 0) {
        if ((uint64_t)s.st_size > (uint64_t)limit) { /* refused before a byte is read */
            spk_file_size_words(limit, words, sizeof words);
            return spk_fail_null("%s: larger than the %s limit for %s (%lld bytes)", name, words,
                                 what ? what : "this file", (long long)s.st_size);
        }
        cap = (size_t)s.st_size + 1;
    }
    size_t n = 0;
    char *buf = malloc(cap + 1);
    if (!buf)
        return spk_fail_null("%s: out of memory reading it", name);
    for (;;) {
        if (n == cap) {
            if (cap > limit)
                break;
            size_t grown = cap * 2 > limit + 1 ? limit + 1 : cap * 2;
            char *g = realloc(buf, grown + 1);
            if (!g) {
                free(buf);
                return spk_fail_null("%s: out of memory reading it", name);
            }
            buf = g;
            cap = grown;
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int err = errno;
            free(buf);
            return spk_fail_null("%s: read failed: %s", name, strerror(err));
        }
        if (got == 0)
            break;
        n += (size_t)got;
        if (n > limit)
            break;
    }
    if (n > limit) {
        free(buf);
        spk_file_size_words(limit, words, sizeof words);
        return spk_fail_null("%s: larger than the %s limit for %s", name, words, what ? what : "this file");
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

char *spk_file_read(const char *path, size_t limit, const char *what, size_t *len)
{
    int fd = spk_file_open(path, NULL);
    if (fd < 0)
        return NULL;
    char *text = spk_file_read_fd(fd, path, limit, what, len);
    close(fd);
    return text;
}
