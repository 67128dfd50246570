/* emu_nccl.h: the NCCL subset of the emulator (nccl.h's names and values), for ranks that are
 * processes on one machine (see kernels/emu/README.md for the rest of the subset).
 * Owns: communicators as a star of loopback TCP connections to rank 0. ncclGetUniqueId starts a
 * listener on 127.0.0.1 (any port) in the calling process, which must then open rank 0; the id
 * holds "gkemu-nccl 127.0.0.1:PORT TOKEN". A collective sends every rank's buffer to rank 0,
 * which reduces in rank order (deterministic; sums of fp32, fp64, int32, int64) and sends the
 * results back. Device memory is host memory here, so it is plain socket I/O.
 * Blocking communicators (the default) run each call to its end; with config.blocking = 0 init
 * and collectives return ncclInProgress and run on a thread of the communicator, and
 * ncclCommGetAsyncError says ncclInProgress until they end (then their result), as NCCL's
 * nonblocking mode does; ncclCommAbort interrupts them. Waits are bounded only by a peer's
 * socket closing (ncclRemoteError) or an abort, as NCCL's are; a failed call fails the
 * communicator and closes its connections, so the other ranks fail too.
 * Errors: ncclGetErrorString as NCCL's; ncclGetLastError(comm) says what happened ("rank 1
 * closed its connection"). Thread safety: a communicator is used by one host thread. */
#ifndef GK_EMU_NCCL_H
#define GK_EMU_NCCL_H

#include <limits.h>
#include <stddef.h>

#include "kernels/emu/emu_runtime.h"

typedef struct ncclComm *ncclComm_t;

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclNumResults = 8
} ncclResult_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

typedef enum {
    ncclInt8 = 0, ncclChar = 0,
    ncclUint8 = 1,
    ncclInt32 = 2, ncclInt = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6, ncclHalf = 6,
    ncclFloat32 = 7, ncclFloat = 7,
    ncclFloat64 = 8, ncclDouble = 8,
    ncclBfloat16 = 9,
} ncclDataType_t;

/* The fields of ncclConfig_t the emulator reads (a prefix of the real struct: set only these). */
#define NCCL_CONFIG_UNDEF_INT INT_MIN
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking; /* 0: nonblocking; 1 or NCCL_CONFIG_UNDEF_INT: blocking */
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER {sizeof(ncclConfig_t), 0xcafebeef, 0, NCCL_CONFIG_UNDEF_INT}

GK_EMU_API ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
GK_EMU_API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
GK_EMU_API ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id,
                                               int rank, ncclConfig_t *config);
GK_EMU_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error);
GK_EMU_API ncclResult_t ncclCommFinalize(ncclComm_t comm);
GK_EMU_API ncclResult_t ncclCommDestroy(ncclComm_t comm);
GK_EMU_API ncclResult_t ncclCommAbort(ncclComm_t comm);
GK_EMU_API const char *ncclGetErrorString(ncclResult_t result);
GK_EMU_API const char *ncclGetLastError(ncclComm_t comm);

/* Collectives: sum only (ncclSum); streams are accepted and ignored (the emulator is synchronous),
 * but a capturing stream is refused (ncclInvalidUsage: not captured into graphs here). */
GK_EMU_API ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream);
GK_EMU_API ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                          ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                          cudaStream_t stream);
GK_EMU_API ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                      ncclDataType_t datatype, ncclComm_t comm,
                                      cudaStream_t stream);
GK_EMU_API ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                      ncclDataType_t datatype, int root, ncclComm_t comm,
                                      cudaStream_t stream);

#endif
