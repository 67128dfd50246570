/* test_ops_paths.c: test_ops.c's cases on the CUDA device's attention paths (plain, flash, and
 * cudnn on a GPU) and with its fused gradient epilogues, where test_ops runs them on the CPU and
 * the device's defaults: a binary of its own, so that the two halves run side by side under
 * tests/run.sh (ops_harness.h: OPS_PATHS). */
#define OPS_PATHS 1
#include "test_ops.c"
