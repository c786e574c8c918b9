/* libFuzzer target: the kernel cache's entry reader. spk_compile reads an
 * entry file through the core reader (bounded) and accepts it only if
 * spk_entry_check does (src/cuda/kernel_files.c); this target runs both on
 * fuzzed bytes and checks what an accepted entry must be: the payload lies
 * within the file, the entry was made for the key it is checked against and
 * for no other, and writing that payload for that key gives back the same
 * bytes. Also the names the cache counts and removes.
 *
 * Input: the entry file. The key is the one its header records (bytes
 * 24..55), so that whole entries are reachable; the kind (cubin or PTX) is
 * the one in byte 12. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "cuda/kernel_files.h"

static char path[64];

static void remove_file(void) { unlink(path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        /* tmpfs where there is one: every input is written */
        snprintf(path, sizeof path, "%s/spk-fuzz-entry-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        int fd = mkstemp(path);
        if (fd < 0)
            abort();
        close(fd);
        atexit(remove_file);
    }
    /* Through the reader, as cache_read does. */
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    fwrite(data, 1, size, f);
    fclose(f);
    size_t len;
    char *read = spk_file_read(path, SPK_ENTRY_MAX, "a kernel-cache entry", &len);
    if (!read || len != size || memcmp(read, data, size) != 0)
        abort();

    uint8_t key[32] = {0};
    if (size >= 56)
        memcpy(key, data + 24, 32);
    bool ptx = size > 12 && data[12] == 1;
    size_t bytes = 0;
    spk_entry_status status = spk_entry_check(read, len, key, ptx, &bytes);
    if (status == SPK_ENTRY_OK) {
        if (bytes != size - SPK_ENTRY_HEADER)
            abort();
        uint8_t header[SPK_ENTRY_HEADER];
        spk_entry_header(header, key, ptx, read + SPK_ENTRY_HEADER, bytes);
        if (memcmp(header, read, SPK_ENTRY_HEADER) != 0)
            abort(); /* accepted bytes are exactly what the writer writes */
        uint8_t other[32];
        memcpy(other, key, 32);
        other[size % 32] ^= 0x01;
        size_t unused;
        if (spk_entry_check(read, len, other, ptx, &unused) != SPK_ENTRY_OTHER_KEY)
            abort(); /* an entry serves its own key only */
        if (spk_entry_check(read, len, key, !ptx, &unused) == SPK_ENTRY_OK)
            abort(); /* and its own kind */
    } else if (status != SPK_ENTRY_CORRUPT && status != SPK_ENTRY_OTHER_KEY) {
        abort();
    }
    free(read);

    /* The names: at most 80 bytes of the input as a file name. */
    char name[81];
    size_t n = size < 80 ? size : 80;
    memcpy(name, data, n);
    name[n] = '\0';
    bool entry = spk_is_entry_name(name), temp = spk_is_entry_temp_name(name);
    if (entry && (strlen(name) != SPK_KEY_HEX + 4 || temp))
        abort();
    if (temp && strncmp(name + SPK_KEY_HEX, ".bin.tmp.", 9) != 0)
        abort();
    return 0;
}
