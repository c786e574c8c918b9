#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

const char *spk_file_kind(mode_t mode)
{
    static const struct {
        mode_t type;
        const char *words;
    } kinds[] = {
        {S_IFREG, "a regular file"}, {S_IFDIR, "a folder"},  {S_IFIFO, "a FIFO"},         {S_IFCHR, "a character device"},
        {S_IFBLK, "a block device"}, {S_IFSOCK, "a socket"}, {S_IFLNK, "a symbolic link"},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if ((mode & S_IFMT) == kinds[i].type)
            return kinds[i].words;
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

/* Whether the resolved path `real` is `root` itself or below it. */
static bool path_below(const char *real, const char *root)
{
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/')
        return true;
    return strncmp(real, root, n) == 0 && (real[n] == '/' || real[n] == '\0');
}

int spk_file_open_within(const char *path, const char *const *roots, int nroots, const char *what, struct stat *st)
{
    struct stat s;
    int fd = spk_file_open(path, &s);
    if (fd < 0)
        return -1;
    char *real = realpath(path, NULL);
    struct stat rs;
    int err = !real ? errno : stat(real, &rs) != 0 ? errno : 0;
    if (err || rs.st_dev != s.st_dev || rs.st_ino != s.st_ino) {
        free(real);
        close(fd);
        return spk_fail("%s: %s", path, err ? strerror(err) : "changed while it was opened");
    }
    bool inside = false;
    for (int i = 0; i < nroots && !inside; i++) {
        char *root = roots[i] ? realpath(roots[i], NULL) : NULL;
        inside = root && path_below(real, root);
        free(root);
    }
    if (!inside) {
        spk_fail("%s: resolves to %s, outside %s (%s)", path, real, what, nroots > 0 && roots[0] ? roots[0] : "");
        free(real);
        close(fd);
        return -1;
    }
    free(real);
    if (st)
        *st = s;
    return fd;
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

/* ---- writing ------------------------------------------------------------ */

struct spk_file_out {
    int dir;     /* the target's folder */
    char *name;  /* the target, in dir */
    char *tmp;   /* the temporary file, in dir */
    char *shown; /* the target, for messages */
    bool existed;
    mode_t mode; /* of the file written: the replaced file's, or the new file's */
    FILE *f;
};

static void out_free(spk_file_out *o)
{
    if (o->dir >= 0)
        close(o->dir);
    free(o->name);
    free(o->tmp);
    free(o->shown);
    free(o);
}

/* Opens the temporary file beside the target: ".<name>.spk-tmp-<pid>-<n>",
 * the name shortened to keep it within NAME_MAX. */
static int open_temporary(spk_file_out *o)
{
    static unsigned counter;
    char buf[NAME_MAX + 1];
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
        snprintf(buf, sizeof buf, ".%.200s.spk-tmp-%ld-%u", o->name, (long)getpid(), n);
        int fd = openat(o->dir, buf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, o->mode);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0)
            return spk_fail("%s: cannot create: %s", o->shown, strerror(errno));
        if (o->existed)
            fchmod(fd, o->mode);
        o->tmp = strdup(buf);
        if (!o->tmp) {
            unlinkat(o->dir, buf, 0);
            close(fd);
            return spk_fail("out of memory");
        }
        return fd;
    }
    return spk_fail("%s: cannot create a temporary file beside it", o->shown);
}

static spk_file_out *out_open(int dir, const char *name, const char *shown, mode_t mode)
{
    spk_file_out *o = calloc(1, sizeof *o);
    if (!o) {
        close(dir);
        return spk_fail_null("out of memory");
    }
    o->dir = dir;
    o->mode = mode;
    o->name = strdup(name);
    o->shown = strdup(shown);
    if (!o->name || !o->shown) {
        out_free(o);
        return spk_fail_null("out of memory");
    }
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (!S_ISREG(st.st_mode)) {
            spk_fail("%s: not a regular file (%s); spk writes only regular files", shown, spk_file_kind(st.st_mode));
            out_free(o);
            return NULL;
        }
        o->existed = true;
        o->mode = st.st_mode & 07777;
    } else if (errno != ENOENT) {
        spk_fail("%s: cannot write: %s", shown, strerror(errno));
        out_free(o);
        return NULL;
    }
    int fd = open_temporary(o);
    if (fd < 0) {
        out_free(o);
        return NULL;
    }
    o->f = fdopen(fd, "wb");
    if (!o->f) {
        int err = errno;
        close(fd);
        unlinkat(o->dir, o->tmp, 0);
        out_free(o);
        return spk_fail_null("%s: cannot write: %s", shown, strerror(err));
    }
    return o;
}

spk_file_out *spk_file_out_openat(int dir, const char *name, const char *shown, mode_t mode)
{
    int own = fcntl(dir, F_DUPFD_CLOEXEC, 0);
    if (own < 0)
        return spk_fail_null("%s: cannot write: %s", shown ? shown : name, strerror(errno));
    return out_open(own, name, shown ? shown : name, mode);
}

spk_file_out *spk_file_out_open(const char *path)
{
    if (!path || !*path)
        return spk_fail_null("cannot write a file without a name");
    /* A link is followed to the file it names, which is then replaced. */
    char *target = NULL;
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        target = realpath(path, NULL);
        if (!target)
            return spk_fail_null("%s: a symbolic link to nothing that can be written (%s)", path, strerror(errno));
    }
    const char *at = target ? target : path;
    const char *slash = strrchr(at, '/');
    char *folder = slash ? strndup(at, (size_t)(slash - at) + (slash == at)) : strdup(".");
    const char *name = slash ? slash + 1 : at;
    if (!folder) {
        free(target);
        return spk_fail_null("out of memory");
    }
    spk_file_out *o = NULL;
    if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        spk_fail("%s: not a regular file (a folder); spk writes only regular files", path);
    } else {
        int dir = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
            spk_fail("%s: cannot create: %s", path, strerror(errno));
        else
            o = out_open(dir, name, path, 0666);
    }
    free(folder);
    free(target);
    return o;
}

FILE *spk_file_out_stream(spk_file_out *out)
{
    return out->f;
}

void spk_file_out_discard(spk_file_out *out)
{
    if (!out)
        return;
    if (out->f)
        fclose(out->f);
    unlinkat(out->dir, out->tmp, 0);
    out_free(out);
}

/* Removes the temporary file and reports `err` for the target. */
static int out_fail(spk_file_out *out, int err)
{
    if (out->f)
        fclose(out->f);
    unlinkat(out->dir, out->tmp, 0);
    spk_fail("%s: write failed: %s (%s)", out->shown, strerror(err),
             out->existed ? "the file is unchanged" : "nothing was written");
    out_free(out);
    return -1;
}

int spk_file_out_commit(spk_file_out *out)
{
    int err = 0;
    if (fflush(out->f) != 0 || ferror(out->f))
        err = errno ? errno : EIO;
    if (!err && fsync(fileno(out->f)) != 0)
        err = errno;
    if (fclose(out->f) != 0 && !err)
        err = errno ? errno : EIO;
    out->f = NULL;
    if (!err && renameat(out->dir, out->tmp, out->dir, out->name) != 0)
        err = errno;
    if (err)
        return out_fail(out, err);
    out_free(out);
    return 0;
}

int spk_file_write(const char *path, const void *data, size_t size)
{
    spk_file_out *o = spk_file_out_open(path);
    if (!o)
        return -1;
    errno = 0;
    if (size && fwrite(data, 1, size, o->f) != size)
        return out_fail(o, errno ? errno : EIO);
    return spk_file_out_commit(o);
}

int spk_file_remove(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return spk_fail("cannot remove %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
        return spk_fail("cannot remove %s: not a regular file (%s); spk removes only files it wrote", path,
                        spk_file_kind(st.st_mode));
    if (unlink(path) != 0)
        return spk_fail("cannot remove %s: %s", path, strerror(errno));
    return 0;
}

/* One folder of the path: made, or already a folder. */
static int make_one(const char *prefix, const char *path, mode_t mode)
{
    if (mkdir(prefix, mode) == 0)
        return 1;
    int err = errno;
    struct stat st;
    if (stat(prefix, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return 0;
        return spk_fail("cannot make the folder %s: %s is %s", path, prefix, spk_file_kind(st.st_mode));
    }
    return spk_fail("cannot make the folder %s: %s: %s", path, prefix, strerror(err));
}

int spk_folder_make(const char *path, mode_t mode, bool *made)
{
    if (made)
        *made = false;
    size_t n = path ? strlen(path) : 0;
    if (n == 0)
        return spk_fail("cannot make a folder: the path is empty");
    if (n >= PATH_MAX)
        return spk_fail("cannot make the folder %.64s...: the path is longer than %d bytes", path, PATH_MAX - 1);
    char prefix[PATH_MAX];
    memcpy(prefix, path, n + 1);
    while (n > 1 && prefix[n - 1] == '/')
        prefix[--n] = '\0'; /* "a/b/" is the folder a/b */
    int rc = 0;
    /* each prefix that ends before a '/', then the whole path */
    for (size_t i = 1; i <= n && rc >= 0; i++) {
        if (i < n && prefix[i] != '/')
            continue;
        if (i < n && prefix[i - 1] == '/')
            continue; /* "a//b": one folder */
        char kept = prefix[i];
        prefix[i] = '\0';
        rc = make_one(prefix, path, mode);
        prefix[i] = kept;
    }
    if (rc < 0)
        return -1;
    if (made)
        *made = rc == 1;
    return 0;
}

int spk_folder_remove_empty(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return spk_fail("cannot remove the folder %s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return spk_fail("cannot remove the folder %s: it is %s", path, spk_file_kind(st.st_mode));
    if (rmdir(path) != 0)
        return spk_fail("cannot remove the folder %s: %s", path, strerror(errno));
    return 0;
}

bool spk_file_is_temporary(const char *name, const char *target)
{
    size_t n = strlen(target);
    if (name[0] != '.' || strncmp(name + 1, target, n) != 0 || strncmp(name + 1 + n, ".spk-tmp-", 9) != 0)
        return false;
    return spk_file_pid_tail(name + 1 + n + 9, '-', "0123456789");
}

bool spk_file_pid_tail(const char *p, char sep, const char *digits)
{
    size_t pid = strspn(p, "0123456789");
    if (pid == 0 || p[pid] != sep)
        return false;
    p += pid + 1;
    size_t count = strspn(p, digits);
    return count > 0 && p[count] == '\0';
}
