/* Thread-block cluster queries: see cluster.h. */
#include "cuda/cluster.h"

#include <string.h>

#include <cuda_runtime.h>

#include "core/error.h"
#include "cuda/internal.h"

static int kernel_fail(spk_kernel *k, cudaError_t err, const char *what)
{
    if (spk_cuda_check(err, what) == 0)
        return 0;
    spk_error_prefix("kernel %s", spk_kernel_name(k));
    return -1;
}

int spk_kernel_allow_cluster(spk_kernel *k, const unsigned cluster[3])
{
    unsigned blocks = 1;
    for (int i = 0; i < 3; i++)
        blocks *= cluster[i] ? cluster[i] : 1;
    if (blocks <= SPK_PORTABLE_CLUSTER)
        return 0;
    if (spk_cuda_require() != 0)
        return -1;
    const void *f = (const void *)spk_kernel_handle(k);
    struct cudaFuncAttributes a;
    if (kernel_fail(k, cudaFuncGetAttributes(&a, f), "cudaFuncGetAttributes"))
        return -1;
    if (a.nonPortableClusterSizeAllowed)
        return 0;
    return kernel_fail(k, cudaFuncSetAttribute(f, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
                       "cudaFuncSetAttribute(non-portable cluster size)");
}

int spk_kernel_max_active_clusters(spk_kernel *k, const spk_launch_config *cfg, int *clusters)
{
    if (spk_cuda_require() != 0)
        return -1;
    if ((cfg->smem > 48 * 1024 && spk_kernel_set_max_dynamic_smem(k, cfg->smem) != 0) ||
        spk_kernel_allow_cluster(k, cfg->cluster) != 0)
        return -1;
    cudaLaunchConfig_t lc;
    memset(&lc, 0, sizeof lc);
    lc.gridDim = (dim3){cfg->grid[0] ? cfg->grid[0] : 1, cfg->grid[1] ? cfg->grid[1] : 1,
                        cfg->grid[2] ? cfg->grid[2] : 1};
    lc.blockDim = (dim3){cfg->block[0] ? cfg->block[0] : 1, cfg->block[1] ? cfg->block[1] : 1,
                         cfg->block[2] ? cfg->block[2] : 1};
    lc.dynamicSmemBytes = cfg->smem;
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = cfg->cluster[0] ? cfg->cluster[0] : 1;
    attr.val.clusterDim.y = cfg->cluster[1] ? cfg->cluster[1] : 1;
    attr.val.clusterDim.z = cfg->cluster[2] ? cfg->cluster[2] : 1;
    lc.attrs = &attr;
    lc.numAttrs = 1;
    int n = 0;
    cudaError_t err = cudaOccupancyMaxActiveClusters(&n, (const void *)spk_kernel_handle(k), &lc);
    if (err == cudaErrorInvalidClusterSize) {
        cudaGetLastError();
        n = 0; /* not even one cluster of this shape fits */
    } else if (kernel_fail(k, err, "cudaOccupancyMaxActiveClusters")) {
        return -1;
    }
    *clusters = n;
    return 0;
}
