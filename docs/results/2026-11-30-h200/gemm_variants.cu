// The one-off program behind gemm_variants.txt (H200, 2026-11-30): a layer's FP32 input
// projections as two cublasGemmEx calls, one cublasGemmStridedBatchedEx, one N = 1024 GEMM, and
// cuBLASLt's heuristic candidates for each. Not part of the build:
//   nvcc -std=c++20 -O2 -arch=sm_90 -o gemm_variants gemm_variants.cu -lcublas -lcublasLt
//   ./gemm_variants    # on the GPU machine; B = batch, K = the layer's input size
// Experiment: the stack's FP32 input projections, cuBLAS variants.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cublas_v2.h>
#include <cublasLt.h>
#include <cuda_runtime.h>
#define CK(x) do { auto e_ = (x); if ((int)e_ != 0) { printf("%s:%d err %d\n", __FILE__, __LINE__, (int)e_); exit(1);} } while (0)

static float time_it(cudaStream_t s, int reps, auto fn) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int i = 0; i < 3; i++) fn();
  cudaEventRecord(a, s);
  for (int i = 0; i < reps; i++) fn();
  cudaEventRecord(b, s); cudaEventSynchronize(b);
  float ms; cudaEventElapsedTime(&ms, a, b);
  return ms / reps;
}

int main(int argc, char **argv) {
  int batches[] = {64, 256};
  int Ks[] = {60, 256};
  cublasHandle_t h; CK(cublasCreate(&h));
  cublasLtHandle_t lt; CK(cublasLtCreate(&lt));
  size_t wsb = 32u << 20; void *ws; CK(cudaMalloc(&ws, wsb));
  CK(cublasSetWorkspace(h, ws, wsb));
  cudaStream_t s; cudaStreamCreate(&s); cublasSetStream(h, s);
  for (int bi = 0; bi < 2; bi++) for (int ki = 0; ki < 2; ki++) {
    int B = batches[bi], K = Ks[ki]; long rows = (long)B * 589; int N = 512;
    float *A, *W, *C;
    CK(cudaMalloc(&A, rows * K * 4)); CK(cudaMalloc(&W, 2L * N * K * 4)); CK(cudaMalloc(&C, 2L * rows * N * 4));
    cudaMemset(A, 0, rows*K*4); cudaMemset(W, 0, 2L*N*K*4);
    float one = 1, zero = 0;
    double flops = 2.0 * rows * K * 2 * N;
    auto v1 = [&] { for (int d = 0; d < 2; d++)
      CK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, rows, K, &one, W + (long)d*N*K, CUDA_R_32F, K, A, CUDA_R_32F, K,
                      &zero, C + (long)d*rows*N, CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)); };
    auto v2 = [&] { CK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, rows, K, &one, W, CUDA_R_32F, K, (long long)N*K,
                      A, CUDA_R_32F, K, 0, &zero, C, CUDA_R_32F, N, (long long)rows*N, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)); };
    auto v3 = [&] { CK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2*N, rows, K, &one, W, CUDA_R_32F, K, A, CUDA_R_32F, K,
                      &zero, C, CUDA_R_32F, 2*N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)); };
    // swapped operand order: C_d^T? no: compute C[rows, N] row-major as col-major C^T; alternative is to ask for
    // col-major C'(rows x N) = A (rows x K, col-major would need transposes) -> skip.
    float t1 = time_it(s, 20, v1), t2 = time_it(s, 20, v2), t3 = time_it(s, 20, v3);
    printf("B %d K %d: two gemms %.4f ms (%.1f TF/s)  strided-batched %.4f  one N=1024 %.4f\n", B, K, t1, flops/t1/1e9, t2, t3);
    // cublasLt: per direction shape (N x rows), batch 2 strided, time top algos.
    for (int batched = 0; batched < 3; batched++) {
      cublasLtMatmulDesc_t op; CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
      CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
      int m = batched == 2 ? 2*N : N;
      cublasLtMatrixLayout_t la, lb, lc;
      CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, K, m, K));
      CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, K, rows, K));
      CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, rows, m));
      if (batched == 1) {
        int cnt = 2; long long sa = (long long)N*K, sb = 0, sc = (long long)rows*N;
        for (auto l : {la, lb, lc}) CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &cnt, sizeof cnt));
        CK(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sa, sizeof sa));
        CK(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sb, sizeof sb));
        CK(cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sc, sizeof sc));
      }
      cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
      CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
      cublasLtMatmulHeuristicResult_t res[64]; int got = 0;
      CK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 64, res, &got));
      std::vector<std::pair<float,int>> ts;
      for (int i = 0; i < got; i++) {
        auto fn = [&] { int calls = batched == 0 ? 2 : 1; for (int d = 0; d < calls; d++)
          cublasLtMatmul(lt, op, &one, W + (long)d*N*K, la, A, lb, &zero, C + (long)d*rows*N, lc, C + (long)d*rows*N, lc,
                         &res[i].algo, ws, wsb, s); };
        float t = time_it(s, 10, fn);
        if (cudaGetLastError() != cudaSuccess) continue;
        ts.push_back({t, i});
      }
      std::sort(ts.begin(), ts.end());
      printf("  lt %s: %d algos; first %.4f; best", batched == 0 ? "two" : batched == 1 ? "batched" : "N=1024", got,
             ts.empty() ? -1.f : [&]{ for (auto &p : ts) if (p.second == 0) return p.first; return -1.f; }());
      for (int j = 0; j < (int)ts.size() && j < 4; j++) {
        int id = 0, tile = 0, stages = 0, splitk = 0;
        cublasLtMatmulAlgoConfigGetAttribute(&res[ts[j].second].algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, NULL);
        cublasLtMatmulAlgoConfigGetAttribute(&res[ts[j].second].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, NULL);
        cublasLtMatmulAlgoConfigGetAttribute(&res[ts[j].second].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, NULL);
        cublasLtMatmulAlgoConfigGetAttribute(&res[ts[j].second].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, NULL);
        printf(" [#%d %.4f id%d tile%d st%d sk%d]", ts[j].second, ts[j].first, id, tile, stages, splitk);
      }
      printf("\n");
    }
    cudaFree(A); cudaFree(W); cudaFree(C);
  }
  return 0;
}
