#include "cuda/kernel_files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "cuda/runtime.h"

int spk_buffer_add(spk_buffer *b, const void *data, size_t len)
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

int spk_buffer_field(spk_buffer *b, const char *tag, const void *data, size_t len)
{
    char head[96];
    int n = snprintf(head, sizeof head, "%s %zu\n", tag, len);
    return spk_buffer_add(b, head, (size_t)n) || spk_buffer_add(b, data, len) || spk_buffer_add(b, "\n", 1);
}

char *spk_kernel_source_read(const char *path, const char *what, size_t *len)
{
    size_t n;
    char *text = spk_file_read(path, SPK_SOURCE_MAX, what, &n);
    if (!text)
        return NULL;
    size_t first = strlen(text);
    if (first != n) {
        free(text);
        return spk_fail_null("%s: holds a NUL byte at offset %zu (a kernel source is text)", path, first);
    }
    if (len)
        *len = n;
    return text;
}

void spk_dirname(const char *path, char *out, size_t size)
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

int spk_include_path_add(spk_include_path *ip, const char *dir)
{
    if (!dir || !*dir)
        return 0;
    if (ip->n == SPK_INCLUDE_DIRS_MAX)
        return spk_fail("spk.cuda.compile: more than %d include folders", SPK_INCLUDE_DIRS_MAX - 2);
    if (snprintf(ip->dirs[ip->n++], PATH_MAX, "%s", dir) >= PATH_MAX)
        return spk_fail("spk.cuda.compile: the include folder %.64s... is longer than PATH_MAX", dir);
    return 0;
}

typedef struct seen_files {
    char (*paths)[PATH_MAX];
    int n;
} seen_files;

static int hash_includes(spk_buffer *key, const char *text, const char *from_dir, const spk_include_path *ip,
                         seen_files *seen, int depth)
{
    if (depth > SPK_INCLUDE_DEPTH_MAX)
        return spk_fail("spk.cuda.compile: #include nesting deeper than %d", SPK_INCLUDE_DEPTH_MAX);
    for (const char *line = text; line && *line;) {
        const char *next = strchr(line, '\n');
        const char *stop = next ? next : line + strlen(line);
        const char *p = line + strspn(line, " \t");
        line = next ? next + 1 : NULL;
        if (p >= stop || *p != '#')
            continue;
        p += 1 + strspn(p + 1, " \t");
        if (strncmp(p, "include", 7) != 0)
            continue;
        p += 7 + strspn(p + 7, " \t");
        if (p >= stop || (*p != '"' && *p != '<'))
            continue;
        bool angle = *p == '<';
        /* Within this line only: a search to the end of the text for every
         * line would make a long source quadratic. */
        const char *end = memchr(p + 1, angle ? '>' : '"', (size_t)(stop - p - 1));
        if (!end)
            continue;
        size_t name_len = (size_t)(end - p - 1);
        if (name_len >= PATH_MAX)
            return spk_fail("spk.cuda.compile: an #include name of %zu bytes is longer than PATH_MAX", name_len);
        char name[PATH_MAX];
        memcpy(name, p + 1, name_len);
        name[name_len] = '\0';

        char found[PATH_MAX] = "";
        char candidate[PATH_MAX];
        if (name[0] == '/') {
            if (access(name, F_OK) == 0)
                snprintf(found, sizeof found, "%s", name);
        } else {
            const char *dirs[SPK_INCLUDE_DIRS_MAX + 1];
            int ndirs = 0;
            if (from_dir && !angle)
                dirs[ndirs++] = from_dir;
            for (int i = 0; i < ip->n; i++)
                dirs[ndirs++] = ip->dirs[i];
            for (int i = 0; i < ndirs && !found[0]; i++) {
                if (snprintf(candidate, sizeof candidate, "%s/%s", dirs[i], name) >= (int)sizeof candidate)
                    continue;
                if (access(candidate, F_OK) == 0)
                    snprintf(found, sizeof found, "%s", candidate);
            }
        }
        if (!found[0]) {
            if (!angle && spk_buffer_field(key, "missing-include", name, strlen(name)))
                return -1;
            continue;
        }
        char real[PATH_MAX];
        if (!realpath(found, real))
            snprintf(real, sizeof real, "%s", found);
        bool again = false;
        for (int i = 0; i < seen->n && !again; i++)
            again = strcmp(seen->paths[i], real) == 0;
        if (again)
            continue;
        if (seen->n == SPK_INCLUDES_MAX)
            return spk_fail("spk.cuda.compile: more than %d files included (at %s)", SPK_INCLUDES_MAX, found);
        snprintf(seen->paths[seen->n++], PATH_MAX, "%s", real);
        size_t len;
        char *content = spk_kernel_source_read(found, "an included file", &len);
        if (!content) {
            spk_error_prefix("spk.cuda.compile: #include %c%s%c", angle ? '<' : '"', name, angle ? '>' : '"');
            return -1;
        }
        char dir[PATH_MAX];
        spk_dirname(found, dir, sizeof dir);
        int rc = spk_buffer_field(key, angle ? "include-angle" : "include", name, strlen(name)) ||
                 spk_buffer_field(key, "content", content, len) ||
                 hash_includes(key, content, dir, ip, seen, depth + 1);
        free(content);
        if (rc)
            return -1;
    }
    return 0;
}

int spk_hash_includes(spk_buffer *key, const char *source, const char *from_dir, const spk_include_path *ip)
{
    seen_files seen = {malloc(SPK_INCLUDES_MAX * sizeof *seen.paths), 0};
    if (!seen.paths)
        return spk_fail("out of memory");
    int rc = hash_includes(key, source, from_dir, ip, &seen, 0);
    free(seen.paths);
    return rc;
}

/* ---- cache entries ----------------------------------------------------- */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

void spk_entry_header(uint8_t header[SPK_ENTRY_HEADER], const uint8_t key[32], bool ptx, const void *code,
                      size_t bytes)
{
    memcpy(header, SPK_ENTRY_MAGIC, 8);
    put_u32(header + 8, SPK_ENTRY_VERSION);
    put_u32(header + 12, ptx ? 1u : 0u);
    put_u64(header + 16, bytes);
    memcpy(header + 24, key, 32);
    spk_sha256(code, bytes, header + 56);
}

spk_entry_status spk_entry_check(const void *data, size_t len, const uint8_t key[32], bool ptx, size_t *bytes)
{
    const uint8_t *h = data;
    if (len < SPK_ENTRY_HEADER || memcmp(h, SPK_ENTRY_MAGIC, 8) != 0 || get_u32(h + 8) != SPK_ENTRY_VERSION ||
        get_u32(h + 12) != (ptx ? 1u : 0u) || get_u64(h + 16) != len - SPK_ENTRY_HEADER)
        return SPK_ENTRY_CORRUPT;
    uint8_t digest[32];
    spk_sha256(h + SPK_ENTRY_HEADER, len - SPK_ENTRY_HEADER, digest);
    if (memcmp(digest, h + 56, 32) != 0)
        return SPK_ENTRY_CORRUPT;
    if (memcmp(h + 24, key, 32) != 0)
        return SPK_ENTRY_OTHER_KEY;
    *bytes = len - SPK_ENTRY_HEADER;
    return SPK_ENTRY_OK;
}

static bool is_key_hex(const char *s)
{
    for (int i = 0; i < SPK_KEY_HEX; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

bool spk_is_entry_name(const char *name)
{
    return strlen(name) == SPK_KEY_HEX + 4 && is_key_hex(name) && strcmp(name + SPK_KEY_HEX, ".bin") == 0;
}

bool spk_is_entry_temp_name(const char *name)
{
    /* the writer's (core/file.h), for the entry it names */
    if (name[0] == '.' && strlen(name) > SPK_KEY_HEX + 5) {
        char entry[SPK_KEY_HEX + 5];
        memcpy(entry, name + 1, SPK_KEY_HEX + 4);
        entry[SPK_KEY_HEX + 4] = '\0';
        return spk_is_entry_name(entry) && spk_file_is_temporary(name, entry);
    }
    /* an earlier writer's: <entry>.tmp.<pid>.<thread> */
    if (strlen(name) <= SPK_KEY_HEX + 9 || !is_key_hex(name) || strncmp(name + SPK_KEY_HEX, ".bin.tmp.", 9) != 0)
        return false;
    return spk_file_pid_tail(name + SPK_KEY_HEX + 9, '.', "0123456789abcdef");
}
