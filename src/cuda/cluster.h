/* Thread-block clusters (sm_90): what the launch side needs beyond
 * runtime.h's spk_launch_config.cluster. Conventions as in runtime.h. */
#ifndef SPK_CUDA_CLUSTER_H
#define SPK_CUDA_CLUSTER_H

#include <stdbool.h>

#include "cuda/runtime.h"

/* Clusters of more than this many blocks are non-portable: a kernel launches
 * them only once it allows them. */
#define SPK_PORTABLE_CLUSTER 8

/* Allows k clusters above the portable size where `cluster` (a launch's
 * cluster dims, 0 read as 1) asks for one
 * (cudaFuncAttributeNonPortableClusterSizeAllowed); nothing otherwise. The
 * launch (spk_kernel_launch) and spk_kernel_max_active_clusters call it, as
 * they allow dynamic shared memory above 48 KiB. */
int spk_kernel_allow_cluster(spk_kernel *k, const unsigned cluster[3]);

/* How many clusters of cfg's shape (cluster dims, block, dynamic shared
 * memory) can be active on the device at once (cudaOccupancyMaxActiveClusters);
 * 0 when not even one fits. Allows cfg->smem first when it is above 48 KiB. */
int spk_kernel_max_active_clusters(spk_kernel *k, const spk_launch_config *cfg, int *clusters);

#endif
