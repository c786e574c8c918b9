/* Launch limits by architecture, an entry's usage from its cubin, and the
 * check of a launch (see launch_limits.h). */
#include "cuda/launch_limits.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define KIB 1024u
#define GRID_X_MAX ((int64_t)INT32_MAX)

/* From the CUDA C++ Programming Guide, "Technical Specifications per Compute
 * Capability": what differs between architectures is the shared memory a
 * block may opt into, whether clusters exist, and the reserve sm_90 and later
 * keep in each block's shared section. */
static const spk_arch_limits archs[] = {
    {70, {GRID_X_MAX, 65535, 65535}, {1024, 1024, 64}, 1024, 0, 0, 96 * KIB, 0, 65536, 255, 256},
    {75, {GRID_X_MAX, 65535, 65535}, {1024, 1024, 64}, 1024, 0, 0, 64 * KIB, 0, 65536, 255, 256},
    {80, {GRID_X_MAX, 65535, 65535}, {1024, 1024, 64}, 1024, 0, 0, 163 * KIB, 0, 65536, 255, 256},
    {86, {GRID_X_MAX, 65535, 65535}, {1024, 1024, 64}, 1024, 0, 0, 99 * KIB, 0, 65536, 255, 256},
    {87, {GRID_X_MAX, 65535, 65535}, {1024, 1024, 64}, 1024, 0, 0, 163 * KIB, 0, 65536, 255, 256},
    {89, {GRID_X_MAX, 65535, 65535}, {1024, 1024, 64}, 1024, 0, 0, 99 * KIB, 0, 65536, 255, 256},
    {90, {GRID_X_MAX, 65535, 65535}, {1024, 1024, 64}, 1024, 8, 16, 227 * KIB, 1 * KIB, 65536, 255, 256},
    {100, {GRID_X_MAX, 65535, 65535}, {1024, 1024, 64}, 1024, 8, 16, 227 * KIB, 1 * KIB, 65536, 255, 256},
    {120, {GRID_X_MAX, 65535, 65535}, {1024, 1024, 64}, 1024, 8, 8, 99 * KIB, 1 * KIB, 65536, 255, 256},
};

int spk_arch_limits_of(const char *arch, spk_arch_limits *out)
{
    const char *digits = arch ? arch : "";
    if (strncmp(digits, "sm_", 3) == 0)
        digits += 3;
    else if (strncmp(digits, "compute_", 8) == 0)
        digits += 8;
    char *end;
    long cc = strtol(digits, &end, 10);
    if (end != digits && (*end == '\0' || strcmp(end, "a") == 0 || strcmp(end, "f") == 0)) {
        for (size_t i = 0; i < sizeof archs / sizeof *archs; i++) {
            if (archs[i].cc == cc) {
                *out = archs[i];
                return 0;
            }
        }
    }
    char known[160];
    size_t at = 0;
    for (size_t i = 0; i < sizeof archs / sizeof *archs && at < sizeof known; i++)
        at += (size_t)snprintf(known + at, sizeof known - at, "%ssm_%d", i ? ", " : "", archs[i].cc);
    return spk_fail("launch limits: no table for the architecture '%s' (known: %s)", arch ? arch : "(none)", known);
}

int64_t spk_block_registers(const spk_arch_limits *lim, int registers, int64_t threads)
{
    int64_t unit = lim->reg_alloc_unit, per_warp = ((int64_t)registers * 32 + unit - 1) / unit * unit;
    return per_warp * ((threads + 31) / 32);
}

/* ---- the cubin (an ELF64 file) ------------------------------------------ */

typedef struct elf {
    const uint8_t *p;
    size_t size;
    uint64_t shoff;
    uint16_t shentsize, shnum, shstrndx;
} elf;

typedef struct section {
    uint32_t name, type;
    uint64_t offset, size;
    uint32_t link, info;
} section;

static bool read_at(const elf *e, uint64_t off, void *dst, size_t n)
{
    if (off > e->size || n > e->size - off)
        return false;
    memcpy(dst, e->p + off, n);
    return true;
}

static bool section_at(const elf *e, unsigned i, section *s)
{
    uint64_t base = e->shoff + (uint64_t)i * e->shentsize;
    uint32_t name, type, link, info;
    uint64_t offset, size;
    if (!read_at(e, base, &name, 4) || !read_at(e, base + 4, &type, 4) || !read_at(e, base + 24, &offset, 8) ||
        !read_at(e, base + 32, &size, 8) || !read_at(e, base + 40, &link, 4) || !read_at(e, base + 44, &info, 4))
        return false;
    *s = (section){name, type, offset, size, link, info};
    return type == 8 /* SHT_NOBITS */ || (offset <= e->size && size <= e->size - offset);
}

/* The section's name, NULL when it has none readable. */
static const char *section_name(const elf *e, const section *strings, const section *s)
{
    if (s->name >= strings->size)
        return NULL;
    const char *name = (const char *)e->p + strings->offset + s->name;
    return memchr(name, '\0', strings->size - s->name) ? name : NULL;
}

/* The value of attribute `attr` for symbol `sym` in the global .nv.info
 * (entries {format 4, attr, size 8, symbol, value}), or `def`. */
static uint32_t global_attr(const elf *e, const section *info, int attr, uint32_t sym, uint32_t def)
{
    for (uint64_t at = info->offset; at + 4 <= info->offset + info->size;) {
        uint8_t format = e->p[at], id = e->p[at + 1];
        uint16_t len = 0;
        if (format == 4 && !read_at(e, at + 2, &len, 2))
            break;
        if (format == 4 && id == attr && len == 8) {
            uint32_t s, v;
            if (read_at(e, at + 4, &s, 4) && read_at(e, at + 8, &v, 4) && s == sym)
                return v;
        }
        at += format == 4 ? 4u + len : 4u;
    }
    return def;
}

/* Three u32 of attribute `attr` in an entry's own .nv.info.<name>. */
static bool entry_attr3(const elf *e, const section *info, int attr, int out[3])
{
    for (uint64_t at = info->offset; at + 4 <= info->offset + info->size;) {
        uint8_t format = e->p[at], id = e->p[at + 1];
        uint16_t len = 0;
        if (format == 4 && !read_at(e, at + 2, &len, 2))
            return false;
        if (format == 4 && id == attr && len == 12) {
            uint32_t v[3];
            if (!read_at(e, at + 4, v, sizeof v))
                return false;
            for (int i = 0; i < 3; i++)
                out[i] = v[i] > INT32_MAX ? INT32_MAX : (int)v[i];
            return true;
        }
        at += format == 4 ? 4u + len : 4u;
    }
    return false;
}

enum { EIATTR_MAX_THREADS = 0x05, EIATTR_FRAME_SIZE = 0x11, EIATTR_REGCOUNT = 0x2f, EIATTR_CLUSTER_DIMS = 0x3d };

/* Fills `u` for the entry whose code is section `text` (named .text.<name>). */
static void entry_usage(const elf *e, const section *strings, const section *text, const char *name,
                        const section *global, size_t reserved, spk_entry_usage *u)
{
    memset(u, 0, sizeof *u);
    snprintf(u->name, sizeof u->name, "%s", name);
    uint32_t sym = text->info & 0xffffff; /* the entry's symbol */
    if (global) {
        u->registers = (int)global_attr(e, global, EIATTR_REGCOUNT, sym, 0);
        u->local_bytes = global_attr(e, global, EIATTR_FRAME_SIZE, sym, 0);
    }
    char want[160];
    for (unsigned i = 0; i < e->shnum; i++) {
        section s;
        const char *n = section_at(e, i, &s) ? section_name(e, strings, &s) : NULL;
        if (!n)
            continue;
        snprintf(want, sizeof want, ".nv.shared.%s", name);
        if (strcmp(n, want) == 0)
            u->static_smem = s.size > reserved ? (size_t)s.size - reserved : 0;
        snprintf(want, sizeof want, ".nv.info.%s", name);
        if (strcmp(n, want) == 0) {
            entry_attr3(e, &s, EIATTR_MAX_THREADS, u->max_threads);
            entry_attr3(e, &s, EIATTR_CLUSTER_DIMS, u->cluster_dims);
        }
    }
}

int spk_cubin_entries(const void *cubin, size_t size, size_t reserved, spk_entry_usage *out, int max, int *count)
{
    elf e = {cubin, size, 0, 0, 0, 0};
    *count = 0;
    const uint8_t *p = cubin;
    if (size < 64 || memcmp(p, "\177ELF", 4) != 0 || p[4] != 2 || p[5] != 1)
        return spk_fail("launch limits: not a cubin (a 64-bit little-endian ELF file)");
    read_at(&e, 0x28, &e.shoff, 8);
    read_at(&e, 0x3a, &e.shentsize, 2);
    read_at(&e, 0x3c, &e.shnum, 2);
    read_at(&e, 0x3e, &e.shstrndx, 2);
    section strings, global = {0}, s;
    bool has_global = false;
    if (e.shentsize < 64 || e.shstrndx >= e.shnum || !section_at(&e, e.shstrndx, &strings))
        return spk_fail("launch limits: the cubin's section table is not readable");
    for (unsigned i = 0; i < e.shnum; i++) {
        const char *n = section_at(&e, i, &s) ? section_name(&e, &strings, &s) : NULL;
        if (n && strcmp(n, ".nv.info") == 0) {
            global = s;
            has_global = true;
        }
    }
    for (unsigned i = 0; i < e.shnum && *count < max; i++) {
        const char *n = section_at(&e, i, &s) ? section_name(&e, &strings, &s) : NULL;
        if (!n || strncmp(n, ".text.", 6) != 0)
            continue;
        /* a kernel (not a device function) has its own .nv.info.<name> */
        char info_name[160];
        snprintf(info_name, sizeof info_name, ".nv.info.%s", n + 6);
        bool kernel = false;
        for (unsigned j = 0; j < e.shnum && !kernel; j++) {
            section t;
            const char *m = section_at(&e, j, &t) ? section_name(&e, &strings, &t) : NULL;
            kernel = m && strcmp(m, info_name) == 0;
        }
        if (kernel)
            entry_usage(&e, &strings, &s, n + 6, has_global ? &global : NULL, reserved, &out[(*count)++]);
    }
    return 0;
}

/* ---- the check ------------------------------------------------------------ */

static void size_words(size_t bytes, char *buf, size_t size)
{
    if (bytes % KIB == 0)
        snprintf(buf, size, "%zu KiB (%zu bytes)", bytes / KIB, bytes);
    else
        snprintf(buf, size, "%zu bytes", bytes);
}

static int check_dims(const spk_arch_limits *lim, const spk_launch_request *r, const char *what)
{
    static const char axis[3] = {'x', 'y', 'z'};
    for (int k = 0; k < 3; k++) {
        if (r->grid[k] > lim->max_grid[k])
            return spk_fail("%s: grid.%c is %" PRId64 "; sm_%d allows at most %" PRId64 " (fix: put the blocks along "
                            "x, which takes up to %" PRId64 ", or fold %c into another dimension)",
                            what, axis[k], r->grid[k], lim->cc, lim->max_grid[k], lim->max_grid[0], axis[k]);
        if (r->block[k] > lim->max_block[k])
            return spk_fail("%s: block.%c is %" PRId64 "; sm_%d allows at most %d (fix: put the threads along x, "
                            "which takes up to %d)",
                            what, axis[k], r->block[k], lim->cc, lim->max_block[k], lim->max_block[0]);
    }
    int64_t threads = r->block[0] * r->block[1] * r->block[2];
    if (threads > lim->max_threads_per_block)
        return spk_fail("%s: a block of %" PRId64 " threads; sm_%d allows at most %d (fix: fewer threads a block, "
                        "more blocks)",
                        what, threads, lim->cc, lim->max_threads_per_block);
    return 0;
}

static int check_cluster(const spk_arch_limits *lim, const spk_entry_usage *u, const spk_launch_request *r,
                         const char *what)
{
    int64_t size = 1;
    bool any = false;
    for (int k = 0; k < 3; k++) {
        any = any || r->cluster[k] > 0;
        size *= r->cluster[k] > 0 ? r->cluster[k] : 1;
    }
    if (!any)
        return 0;
    if (lim->max_cluster == 0)
        return spk_fail("%s: a cluster of %" PRId64 " blocks; sm_%d has no thread-block clusters (fix: launch "
                        "without a cluster, or for sm_90 and later)",
                        what, size, lim->cc);
    int allowed = r->nonportable_cluster ? lim->max_cluster_nonportable : lim->max_cluster;
    if (size > allowed)
        return spk_fail("%s: a cluster of %" PRId64 " blocks; sm_%d allows at most %d%s (fix: a cluster of %d blocks "
                        "or fewer)",
                        what, size, lim->cc, allowed,
                        r->nonportable_cluster ? "" : " (the portable size; this launch does not opt into more)",
                        allowed);
    for (int k = 0; k < 3; k++)
        if (u->cluster_dims[k] > 0 && u->cluster_dims[k] != (r->cluster[k] > 0 ? r->cluster[k] : 1))
            return spk_fail("%s: a cluster of {%" PRId64 ", %" PRId64 ", %" PRId64 "}; the kernel %s is compiled "
                            "for {%d, %d, %d} (__cluster_dims__) (fix: launch it with that cluster)",
                            what, r->cluster[0], r->cluster[1], r->cluster[2], u->name, u->cluster_dims[0],
                            u->cluster_dims[1], u->cluster_dims[2]);
    return 0;
}

static int check_resources(const spk_arch_limits *lim, const spk_entry_usage *u, const spk_launch_request *r,
                           const char *what)
{
    int64_t threads = r->block[0] * r->block[1] * r->block[2];
    int64_t bound = (int64_t)u->max_threads[0] * (u->max_threads[1] ? u->max_threads[1] : 1) *
                    (u->max_threads[2] ? u->max_threads[2] : 1);
    if (u->max_threads[0] > 0 && threads > bound)
        return spk_fail("%s: a block of %" PRId64 " threads; the kernel %s is compiled for at most %" PRId64
                        " (__launch_bounds__ or .maxntid) (fix: launch at most %" PRId64 " threads a block, or raise "
                        "the bound)",
                        what, threads, u->name, bound, bound);
    char asked[64], limit[64];
    if (r->dynamic_smem > lim->max_smem_per_block || u->static_smem > lim->max_smem_per_block - r->dynamic_smem) {
        size_words(r->dynamic_smem, asked, sizeof asked);
        size_words(lim->max_smem_per_block, limit, sizeof limit);
        return spk_fail("%s: %s of dynamic shared memory and %zu bytes of static (the kernel %s's own); sm_%d allows "
                        "a block at most %s of both (fix: at most %zu bytes of dynamic shared memory, or keep part "
                        "of it in registers or global memory)",
                        what, asked, u->static_smem, u->name, lim->cc, limit,
                        u->static_smem < lim->max_smem_per_block ? lim->max_smem_per_block - u->static_smem : 0);
    }
    int64_t regs = spk_block_registers(lim, u->registers, threads);
    if (regs > lim->max_regs_per_block) {
        int64_t fit = 0;
        while (spk_block_registers(lim, u->registers, fit + 32) <= lim->max_regs_per_block && fit < threads)
            fit += 32;
        return spk_fail("%s: a block of %" PRId64 " threads at %d registers each takes %" PRId64 " registers "
                        "(allocated %d a warp at a time); sm_%d allows a block %d (fix: at most %" PRId64
                        " threads a block at this register count, or fewer registers: __launch_bounds__(%" PRId64
                        ") or -maxrregcount=%d)",
                        what, threads, u->registers, regs, lim->reg_alloc_unit, lim->cc, lim->max_regs_per_block, fit,
                        threads, (int)(lim->max_regs_per_block / ((threads + 31) / 32 * 32)) / 8 * 8);
    }
    return 0;
}

int spk_launch_limits_check(const spk_arch_limits *lim, const spk_entry_usage *u, const spk_launch_request *r,
                            const char *what)
{
    if (check_dims(lim, r, what) || check_cluster(lim, u, r, what))
        return -1;
    return check_resources(lim, u, r, what);
}
