/** \file napkin.cuh
 *  The whole device tile library, in the order emitted .cu files hold it (emit/cuda/preamble.hpp):
 *  the primitives of every target, the fp8 conversions (in files that store fp8 arrays), the int8
 *  conversions and mma.sync fragments (in files that store int8 arrays), then the Hopper ones
 *  (device code for sm_90a only).
 */
#pragma once
#include "emit/cuda/device/numeric.cuh"
#include "emit/cuda/device/reduce.cuh"
#include "emit/cuda/device/movers.cuh"
#include "emit/cuda/device/tiles.cuh"
#include "emit/cuda/device/mma.cuh"
#include "emit/cuda/device/pipeline.cuh"
#include "emit/cuda/device/host.cuh"
#include "emit/cuda/device/fp8.cuh"
#include "emit/cuda/device/int8.cuh"
#include "emit/cuda/device/sync.cuh"
#include "emit/cuda/device/tma.cuh"
#include "emit/cuda/device/wgmma.cuh"
#include "emit/cuda/device/launch.cuh"
