// @brief The kernel: shared memory for the row reductions, then the technique's rownorm::rows. Follows
// norm_common.cuh and the technique's files.
//   extern "C" cudal1_norm(x, w, b, y, mean, rstd, workspace, phase)
// w and b are null where absent; the workspace and phase are the technique's (make_norm_kernel).

extern "C" __global__ void __launch_bounds__(rownorm::kThreads, rownorm::kMinBlocks)
cudal1_norm(const storage_t* __restrict__ x, const storage_t* __restrict__ w, const storage_t* __restrict__ b,
            storage_t* __restrict__ y, stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
            float* __restrict__ ws, int phase) {
  __shared__ float red[96];
  rownorm::rows(x, w, b, y, mean_out, rstd_out, ws, phase, red);
}
