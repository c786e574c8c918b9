/* What the built-in kernel families share: see family.h. */
#include "lstm/family.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "spk_status.cuh"

const spk_family *const spk_families[] = {&spk_persistent_kernels, &spk_cluster_kernels, &spk_tensor_core_kernels,
                                           NULL};

const spk_family *spk_family_find(const char *backend)
{
    char names[256] = "";
    size_t n = 0;
    for (int i = 0; spk_families[i]; i++) {
        if (backend && strcmp(spk_families[i]->backend, backend) == 0)
            return spk_families[i];
        if (n < sizeof names)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", spk_families[i]->backend);
    }
    spk_fail("backend %s has no kernel options (%s)", backend ? backend : "nil", names);
    return NULL;
}

#define BUILTIN_STATUS(name, code, message) {code, message},
const spk_kernel_stack_status spk_builtin_statuses[] = {SPK_KERNEL_STATUSES(BUILTIN_STATUS)};
const int spk_builtin_nstatuses = (int)(sizeof spk_builtin_statuses / sizeof *spk_builtin_statuses);

spk_module *spk_family_compile_defines(const char *file, const spk_define *defines, int count,
                                       spk_kernel_build build, const char *arch)
{
    const char *kernels = spk_kernel_dir();
    if (!kernels)
        return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", kernels, file);
    spk_define all[SPK_FAMILY_DEFINES + 1];
    if (count > SPK_FAMILY_DEFINES)
        return spk_fail_null("lstm stack: %d defines for %s, at most %d", count, file, SPK_FAMILY_DEFINES);
    memcpy(all, defines, (size_t)count * sizeof *all);
    if (build != SPK_BUILD_PLAIN)
        all[count++] = (spk_define){build == SPK_BUILD_TRACE ? "SPK_DEBUG_TRACE" : "SPK_TIMELINE", "1"};
    spk_compile_options opts = {0};
    opts.file = path;
    opts.defines = all;
    opts.ndefines = count;
    opts.arch = arch;
    return spk_compile(&opts);
}

spk_module *spk_family_compile_source(const char *file, const spk_kernel_family *options, const void *variant,
                                      spk_kernel_build build, const char *arch)
{
    spk_define defines[SPK_KERNEL_OPTIONS_MAX];
    char text[SPK_KERNEL_OPTIONS_MAX][16];
    int n = spk_kernel_defines(options, variant, defines, text);
    return spk_family_compile_defines(file, defines, n, build, arch);
}

int spk_family_defines(const spk_family *f, const spk_family_state *st, spk_define *out, char text[][16])
{
    int n = spk_kernel_defines(f->options, st->bytes, out, text);
    if (f->extra_defines)
        n += f->extra_defines(st, out + n, text + n);
    return n;
}

int spk_family_check_indices(const spk_family_state *st, const spk_family_request *r)
{
    (void)st;
    if (r->batch * r->steps > INT32_MAX / 4)
        return spk_fail("lstm stack: batch %lld x steps %lld is too large for 32-bit kernel indices",
                        (long long)r->batch, (long long)r->steps);
    return 0;
}
