/* libFuzzer target: the kernel compiler's readers. spk_compile reads a
 * source file and every file its #include lines find (src/cuda/kernel_files.c)
 * before NVRTC runs; this target writes fuzzed files into a scratch folder,
 * some of them as FIFOs or links to /dev/zero, and runs that same reading
 * and include walk on them. A reader that blocks shows as a libFuzzer
 * timeout; one that reads without bound, as an allocation over the limit.
 *
 * Input: one flags byte, then up to MAX_FILES files separated by SEPARATOR:
 * main.cu, inc1.cuh, inc2.cuh, ... (the sources include each other by these
 * names, with "..." or <...>). Flag bit k (k = 1..6) makes file k a FIFO;
 * bit 7 makes inc1.cuh a link to /dev/zero. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "cuda/kernel_files.h"

#define SEPARATOR "\n--spk-file--\n"
#define MAX_FILES 7

static char dir[64];

static void path_of(int k, char *out, size_t size)
{
    if (k == 0)
        snprintf(out, size, "%s/main.cu", dir);
    else
        snprintf(out, size, "%s/inc%d.cuh", dir, k);
}

static void remove_dir(void)
{
    char path[128];
    for (int k = 0; k < MAX_FILES; k++) {
        path_of(k, path, sizeof path);
        unlink(path);
    }
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        /* tmpfs where there is one: every input writes its files */
        snprintf(dir, sizeof dir, "%s/spk-fuzz-source-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        if (!mkdtemp(dir))
            abort();
        atexit(remove_dir);
    }
    if (size == 0)
        return 0;
    unsigned flags = data[0];
    const char *text = (const char *)data + 1, *end = (const char *)data + size;
    const size_t sep_len = sizeof SEPARATOR - 1;
    char path[128];
    int nfiles = 0;
    while (nfiles < MAX_FILES) {
        const char *sep = memmem(text, (size_t)(end - text), SEPARATOR, sep_len);
        const char *stop = sep ? sep : end;
        path_of(nfiles, path, sizeof path);
        if (nfiles >= 1 && (flags >> nfiles) & 1) {
            if (mkfifo(path, 0600) != 0)
                abort();
        } else if (nfiles == 1 && (flags & 0x80)) {
            if (symlink("/dev/zero", path) != 0)
                abort();
        } else {
            FILE *f = fopen(path, "wb");
            if (!f)
                abort();
            fwrite(text, 1, (size_t)(stop - text), f);
            fclose(f);
        }
        nfiles++;
        if (!sep)
            break;
        text = sep + sep_len;
    }

    path_of(0, path, sizeof path);
    size_t len;
    char *source = spk_kernel_source_read(path, "a kernel source", &len);
    if (source) {
        if (strlen(source) != len)
            abort(); /* a NUL passed the check */
        spk_include_path ip = {.n = 0};
        if (spk_include_path_add(&ip, dir) != 0)
            abort();
        spk_buffer key = {0};
        spk_clear_error();
        int rc = spk_hash_includes(&key, source, dir, &ip);
        if (rc != 0 && spk_last_error()[0] == '\0')
            abort(); /* every failure says why */
        if (key.data && strlen(key.data) > key.len)
            abort();
        free(key.data);
        free(source);
    } else if (spk_last_error()[0] == '\0') {
        abort();
    }
    for (int k = 0; k < nfiles; k++) {
        path_of(k, path, sizeof path);
        unlink(path);
    }
    return 0;
}
