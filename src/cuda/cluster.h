/* Thread-block clusters (sm_90): what the launch side needs beyond
 * runtime.h's spk_launch_config.cluster. Conventions as in runtime.h. */
#ifndef SPK_CUDA_CLUSTER_H
#define SPK_CUDA_CLUSTER_H

#include <stdbool.h>

#include "cuda/runtime.h"

/* Allows cluster sizes above the portable 8 (cudaFuncAttributeNonPortableClusterSizeAllowed). */
int spk_kernel_allow_nonportable_cluster(spk_kernel *k, bool allow);

/* How many clusters of cfg's shape (cluster dims, block, dynamic shared
 * memory) can be active on the device at once (cudaOccupancyMaxActiveClusters);
 * 0 when not even one fits. Allows cfg->smem first when it is above 48 KiB. */
int spk_kernel_max_active_clusters(spk_kernel *k, const spk_launch_config *cfg, int *clusters);

#endif
