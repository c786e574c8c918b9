/* A stand-in for a profiler's NVTX injection library (what Nsight Systems
 * loads through $NVTX_INJECTION64_PATH), so tests see the ranges spk emits
 * through NVTX itself, with no profiler and no GPU: each domain made, range
 * pushed and range popped is appended to the file $SPK_NVTX_TOOL_LOG as a
 * line "domain NAME", "push DOMAIN NAME" or "pop DOMAIN".
 *
 * Built as $(BUILD)/tests/nvtx_tool.so; test_nvtx and the GPU specs load it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

/* Domains are handed out as pointers to their names. */
static char domains[16][64];
static int ndomains;

static void log_line(const char *fmt, const char *a, const char *b)
{
    const char *path = getenv("SPK_NVTX_TOOL_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (!f)
        return;
    fprintf(f, fmt, a, b);
    fputc('\n', f);
    fclose(f);
}

static const char *domain_name(nvtxDomainHandle_t d) { return d ? (const char *)d : "(default)"; }

static nvtxDomainHandle_t NVTX_API domain_create(const char *name)
{
    if (ndomains == 16)
        return NULL;
    snprintf(domains[ndomains], sizeof domains[0], "%s", name);
    log_line("domain %s%s", name, "");
    return (nvtxDomainHandle_t)domains[ndomains++];
}

static int NVTX_API range_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    const char *name = a && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "(not ascii)";
    log_line("push %s %s", domain_name(d), name);
    return 0;
}

static int NVTX_API range_pop(nvtxDomainHandle_t d)
{
    log_line("pop %s%s", domain_name(d), "");
    return 0;
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
    const NvtxExportTableCallbacks *callbacks = get_export_table(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!callbacks || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) ||
        size < NVTX_CBID_CORE2_DomainCreateA)
        return 0;
    *table[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)domain_create;
    *table[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)range_push;
    *table[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)range_pop;
    return 1;
}
