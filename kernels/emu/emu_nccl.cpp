/* emu_nccl.cpp: the NCCL subset of emu_nccl.h over loopback TCP, rank 0 the hub of a star.
 * Owns: the listeners ncclGetUniqueId starts (until rank 0's init takes them), the
 * communicators (connections, the thread a nonblocking call runs on, the sticky state), the
 * wire protocol, and the reductions. Every wait polls in ticks and checks the abort flag, so
 * ncclCommAbort ends a call stuck on a silent peer; sockets are nonblocking, sends MSG_NOSIGNAL.
 * While a call runs on the communicator's thread, only that thread touches the connections.
 * Wire: a peer opens with {token, rank, world} and rank 0 answers one int32 (0) once every rank
 * has joined. A collective: each peer sends a Header (op, type, count, root) and its part of the
 * input; rank 0 checks the headers against its own, combines in rank order and sends each peer
 * its part of the result. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/emu/emu_nccl.h"

#include "kernels/bf16.h"

enum Op : uint32_t { OP_ALLREDUCE = 1, OP_REDUCE_SCATTER, OP_ALL_GATHER, OP_BROADCAST };

struct ncclComm {
    int rank = 0, world = 1;
    bool blocking = true;
    std::string token, host;
    int port = 0;
    int listen_fd = -1;          /* rank 0 until every peer joined */
    std::vector<int> fds;        /* rank 0: fds[r] to rank r (fds[0]
                                  * unused); else fds[0] to rank 0 */
    std::thread worker;          /* the running nonblocking call */
    std::atomic<bool> busy{false}, aborting{false};
    ncclResult_t state = ncclSuccess; /* the first failure, sticky */
    std::string msg;             /* what ncclGetLastError says */
};

namespace {

struct Header {
    uint32_t op, type;
    int32_t root, pad;
    uint64_t count;
};
struct Hello {
    char token[32];
    int32_t rank, world;
};

thread_local std::string last_error; /* for calls that have no communicator */
std::mutex pending_mu;
std::vector<std::pair<std::string, int>> pending; /* token -> listener of ncclGetUniqueId */

const int kTickMs = 100;

ncclResult_t fail(ncclComm *c, ncclResult_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
ncclResult_t fail(ncclComm *c, ncclResult_t code, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    (c ? c->msg : last_error) = buf;
    return code;
}

size_t type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    }
    return 0;
}
bool summable(ncclDataType_t t)
{
    return t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 || t == ncclInt32 ||
           t == ncclInt64;
}
const char *op_name(uint32_t op)
{
    static const char *names[] = {"?", "allreduce", "reduce-scatter", "all-gather", "broadcast"};
    return op <= OP_BROADCAST ? names[op] : "?";
}

template <class T> void add(void *acc, const void *x, size_t n)
{
    T *a = static_cast<T *>(acc);
    const T *b = static_cast<const T *>(x);
    for (size_t i = 0; i < n; i++) a[i] += b[i];
}
/* bf16 as NCCL adds it: in float, each partial sum rounded to bf16 */
void add_bf16(void *acc, const void *x, size_t n)
{
    uint16_t *a = static_cast<uint16_t *>(acc);
    const uint16_t *b = static_cast<const uint16_t *>(x);
    for (size_t i = 0; i < n; i++) a[i] = gk_f2bf16(gk_bf16f(a[i]) + gk_bf16f(b[i]));
}
void add_typed(void *acc, const void *x, size_t n, ncclDataType_t t)
{
    if (t == ncclFloat32) add<float>(acc, x, n);
    else if (t == ncclFloat64) add<double>(acc, x, n);
    else if (t == ncclBfloat16) add_bf16(acc, x, n);
    else if (t == ncclInt32) add<int32_t>(acc, x, n);
    else add<int64_t>(acc, x, n);
}

/* ---- sockets ---- */

/* Waits until fd is ready for events; false (with the failure recorded) on abort. */
bool wait_fd(ncclComm *c, int fd, short events, ncclResult_t *rc)
{
    for (;;) {
        if (c->aborting.load()) {
            *rc = fail(c, ncclSystemError, "aborted");
            return false;
        }
        struct pollfd p = {fd, events, 0};
        int n = poll(&p, 1, kTickMs);
        if (n > 0 || (n < 0 && errno != EINTR)) return true; /* errors show in the next call */
    }
}

/* The failure of a connection to rank peer. */
ncclResult_t conn_error(ncclComm *c, int peer, int err)
{
    if (err == 0 || err == ECONNRESET || err == EPIPE)
        return fail(c, ncclRemoteError, "rank %d closed its connection", peer);
    return fail(c, ncclSystemError, "connection to rank %d: %s", peer, strerror(err));
}

ncclResult_t send_all(ncclComm *c, int fd, int peer, const void *buf, size_t n)
{
    const char *p = static_cast<const char *>(buf);
    ncclResult_t rc = ncclSuccess;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k > 0) {
            p += k, n -= (size_t)k;
        } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!wait_fd(c, fd, POLLOUT, &rc)) return rc;
        } else if (errno != EINTR) {
            return conn_error(c, peer, errno);
        }
    }
    return ncclSuccess;
}

ncclResult_t recv_all(ncclComm *c, int fd, int peer, void *buf, size_t n)
{
    char *p = static_cast<char *>(buf);
    ncclResult_t rc = ncclSuccess;
    while (n > 0) {
        ssize_t k = recv(fd, p, n, 0);
        if (k > 0) {
            p += k, n -= (size_t)k;
        } else if (k == 0) {
            return conn_error(c, peer, 0);
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (!wait_fd(c, fd, POLLIN, &rc)) return rc;
        } else if (errno != EINTR) {
            return conn_error(c, peer, errno);
        }
    }
    return ncclSuccess;
}

void tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void close_fds(ncclComm *c, bool shut_only)
{
    for (int &fd : c->fds)
        if (fd >= 0) {
            shutdown(fd, SHUT_RDWR);
            if (!shut_only) close(fd), fd = -1;
        }
    if (!shut_only && c->listen_fd >= 0) close(c->listen_fd), c->listen_fd = -1;
}

/* ---- init ---- */

/* Rank 0: accepts until every other rank has joined, then tells them. */
ncclResult_t hub_init(ncclComm *c)
{
    c->fds.assign((size_t)c->world, -1);
    ncclResult_t rc = ncclSuccess;
    for (int joined = 1; joined < c->world;) {
        if (!wait_fd(c, c->listen_fd, POLLIN, &rc)) return rc;
        int fd = accept4(c->listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        tune(fd);
        Hello h;
        if (recv_all(c, fd, -1, &h, sizeof h) ||
            memcmp(h.token, c->token.data(), sizeof h.token) != 0) {
            close(fd); /* not a peer of this communicator */
            continue;
        }
        if (h.world != c->world || h.rank < 1 || h.rank >= c->world ||
            c->fds[(size_t)h.rank] >= 0) {
            close(fd);
            return fail(c, ncclInvalidUsage, "rank %d of %d joined a communicator of %d ranks%s",
                        (int)h.rank, (int)h.world, c->world, h.world == c->world ? " twice" : "");
        }
        c->fds[(size_t)h.rank] = fd;
        joined++;
    }
    close(c->listen_fd), c->listen_fd = -1;
    int32_t ok = 0;
    for (int r = 1; r < c->world; r++)
        if ((rc = send_all(c, c->fds[(size_t)r], r, &ok, sizeof ok))) return rc;
    return ncclSuccess;
}

ncclResult_t peer_init(ncclComm *c)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail(c, ncclSystemError, "socket: %s", strerror(errno));
    c->fds.assign(1, fd);
    struct sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)c->port);
    inet_pton(AF_INET, c->host.c_str(), &a.sin_addr);
    tune(fd);
    ncclResult_t rc = ncclSuccess;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 && errno != EINPROGRESS)
        return fail(c, ncclSystemError, "cannot connect to rank 0 at %s:%d: %s", c->host.c_str(),
                    c->port, strerror(errno));
    if (!wait_fd(c, fd, POLLOUT, &rc)) return rc;
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err)
        return fail(c, ncclSystemError, "cannot connect to rank 0 at %s:%d: %s", c->host.c_str(),
                    c->port, strerror(err));
    Hello h = {};
    memcpy(h.token, c->token.data(), sizeof h.token);
    h.rank = c->rank, h.world = c->world;
    int32_t ok = -1;
    if ((rc = send_all(c, fd, 0, &h, sizeof h)) || (rc = recv_all(c, fd, 0, &ok, sizeof ok)))
        return rc;
    return ok == 0 ? ncclSuccess : fail(c, ncclInvalidUsage, "rank 0 refused rank %d", c->rank);
}

/* ---- collectives ---- */

struct Coll {
    Header h;
    const void *send;
    void *recv;
    size_t es;
};

size_t in_bytes(const Coll &k, int rank, int world)
{
    switch (k.h.op) {
    case OP_REDUCE_SCATTER: return (size_t)world * k.h.count * k.es;
    case OP_BROADCAST: return rank == k.h.root ? k.h.count * k.es : 0;
    default: return k.h.count * k.es;
    }
}

/* Rank 0: combines every rank's input in rank order into res, then sends each peer its part. */
ncclResult_t hub_coll(ncclComm *c, const Coll &k)
{
    const size_t part = k.h.count * k.es, world = (size_t)c->world;
    const bool reduce = k.h.op == OP_ALLREDUCE || k.h.op == OP_REDUCE_SCATTER;
    std::vector<char> acc, tmp;
    char *res = static_cast<char *>(k.recv);
    if (k.h.op == OP_REDUCE_SCATTER) acc.resize(world * part), res = acc.data();
    /* all-gather's at offset 0 */
    if (in_bytes(k, 0, c->world)) memmove(res, k.send, in_bytes(k, 0, c->world));
    if (reduce) tmp.resize(in_bytes(k, 0, c->world));
    ncclResult_t rc;
    for (int r = 1; r < c->world; r++) {
        int fd = c->fds[(size_t)r];
        Header h;
        if ((rc = recv_all(c, fd, r, &h, sizeof h))) return rc;
        if (h.op != k.h.op || h.type != k.h.type || h.count != k.h.count || h.root != k.h.root)
            return fail(c, ncclInvalidUsage,
                        "rank %d called %s of %llu (type %u, root "
                        "%d), rank 0 %s of %llu (type %u, root %d)",
                        r, op_name(h.op), (unsigned long long)h.count, h.type, h.root,
                        op_name(k.h.op), (unsigned long long)k.h.count, k.h.type, k.h.root);
        size_t n = in_bytes(k, r, c->world);
        char *dst = reduce ? tmp.data() : k.h.op == OP_ALL_GATHER ? res + (size_t)r * part : res;
        if ((rc = recv_all(c, fd, r, dst, n))) return rc;
        if (reduce) add_typed(res, tmp.data(), n / k.es, (ncclDataType_t)k.h.type);
    }
    for (int r = 1; r < c->world; r++) {
        bool scatter = k.h.op == OP_REDUCE_SCATTER;
        size_t n = scatter ? part : k.h.op == OP_ALL_GATHER ? world * part : part;
        if ((rc = send_all(c, c->fds[(size_t)r], r, res + (scatter ? (size_t)r * part : 0), n)))
            return rc;
    }
    if (k.h.op == OP_REDUCE_SCATTER && part) memmove(k.recv, res, part);
    return ncclSuccess;
}

ncclResult_t peer_coll(ncclComm *c, const Coll &k)
{
    int fd = c->fds[0];
    size_t out = k.h.count * k.es * (k.h.op == OP_ALL_GATHER ? (size_t)c->world : 1);
    ncclResult_t rc;
    if ((rc = send_all(c, fd, 0, &k.h, sizeof k.h)) ||
        (rc = send_all(c, fd, 0, k.send, in_bytes(k, c->rank, c->world))))
        return rc;
    return recv_all(c, fd, 0, k.recv, out);
}

/* ---- running a call: inline (blocking) or on the communicator's thread ---- */

void finish(ncclComm *c, ncclResult_t rc)
{
    if (rc != ncclSuccess) {
        c->state = rc;
        close_fds(c, true); /* the other ranks see it at once */
    }
}

void join(ncclComm *c)
{
    if (c->worker.joinable()) c->worker.join();
}

ncclResult_t run(ncclComm *c, std::function<ncclResult_t()> job)
{
    if (c->busy.load())
        return fail(nullptr, ncclInvalidUsage, "a call on this communicator is still in progress");
    join(c);
    if (c->state != ncclSuccess) return c->state;
    if (c->blocking) {
        ncclResult_t rc = job();
        finish(c, rc);
        return rc;
    }
    c->busy.store(true);
    c->worker = std::thread([c, job] {
        finish(c, job());
        c->busy.store(false);
    });
    return ncclInProgress;
}

ncclResult_t collective(ncclComm *c, Op op, const void *send, void *recv, size_t count,
                        ncclDataType_t type, int root, const char *call, cudaStream_t stream)
{
    if (!c) return fail(nullptr, ncclInvalidArgument, "%s: no communicator", call);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (stream && cudaStreamIsCapturing(stream, &capture) == cudaSuccess &&
        capture != cudaStreamCaptureStatusNone)
        return fail(c, ncclInvalidUsage, "%s: the emulator cannot capture NCCL calls into a graph",
                    call);
    if (c->busy.load())
        return fail(nullptr, ncclInvalidUsage, "%s: a call is still in progress", call);
    size_t es = type_size(type);
    if (!es) return fail(c, ncclInvalidArgument, "%s: unknown data type %d", call, (int)type);
    if ((op == OP_ALLREDUCE || op == OP_REDUCE_SCATTER) && !summable(type))
        return fail(c, ncclInvalidArgument,
                    "%s: the emulator sums only float32, float64, bfloat16, int32 and int64", call);
    if (root < 0 || root >= c->world)
        return fail(c, ncclInvalidArgument, "%s: root %d of %d ranks", call, root, c->world);
    if (count > ((size_t)1 << 40) / es)
        return fail(c, ncclInvalidArgument, "%s: count %zu too large", call, count);
    if (count && (!recv || (!send && (op != OP_BROADCAST || c->rank == root))))
        return fail(c, ncclInvalidArgument, "%s: NULL buffer", call);
    Coll k = {{(uint32_t)op, (uint32_t)type, root, 0, count}, send, recv, es};
    return run(c, [c, k] { return c->rank == 0 ? hub_coll(c, k) : peer_coll(c, k); });
}

} // namespace

/* ---- the API ---- */

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    if (!id) return fail(nullptr, ncclInvalidArgument, "ncclGetUniqueId: NULL id");
    unsigned char raw[16];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return fail(nullptr, ncclSystemError, "getrandom: %s", strerror(errno));
    char token[33];
    for (int i = 0; i < 16; i++) snprintf(token + 2 * i, 3, "%02x", raw[i]);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 128) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        int err = errno;
        if (fd >= 0) close(fd);
        return fail(nullptr, ncclSystemError, "listening on 127.0.0.1: %s", strerror(err));
    }
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "gkemu-nccl 127.0.0.1:%d %s",
             (int)ntohs(a.sin_port), token);
    std::lock_guard<std::mutex> lock(pending_mu);
    pending.emplace_back(token, fd);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    if (!comm) return fail(nullptr, ncclInvalidArgument, "ncclCommInitRank: NULL comm");
    *comm = nullptr;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return fail(nullptr, ncclInvalidArgument, "ncclCommInitRank: rank %d of %d", rank, nranks);
    char host[64], token[33];
    int port = 0;
    id.internal[sizeof id.internal - 1] = 0;
    if (sscanf(id.internal, "gkemu-nccl %63[^:]:%d %32s", host, &port, token) != 3 ||
        strlen(token) != 32)
        return fail(nullptr, ncclInvalidArgument,
                    "ncclCommInitRank: not an id from ncclGetUniqueId");
    ncclComm *c = new ncclComm;
    c->rank = rank, c->world = nranks, c->host = host, c->port = port, c->token = token;
    c->blocking = !config || config->blocking != 0;
    if (rank == 0) {
        std::lock_guard<std::mutex> lock(pending_mu);
        for (size_t i = 0; i < pending.size(); i++)
            if (pending[i].first == c->token) {
                c->listen_fd = pending[i].second;
                pending.erase(pending.begin() + (long)i);
                break;
            }
    }
    if (rank == 0 && c->listen_fd < 0) {
        delete c;
        return fail(nullptr, ncclInvalidUsage,
                    "ncclCommInitRank: rank 0 must be opened in the process that made the id");
    }
    ncclResult_t rc = run(c, [c] { return c->rank == 0 ? hub_init(c) : peer_init(c); });
    if (rc != ncclSuccess && rc != ncclInProgress) {
        last_error = c->msg;
        ncclCommAbort(c);
        return rc;
    }
    *comm = c;
    return rc;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error)
{
    if (!comm || !async_error)
        return fail(comm, ncclInvalidArgument, "ncclCommGetAsyncError: NULL argument");
    if (comm->busy.load()) {
        *async_error = ncclInProgress;
        return ncclSuccess;
    }
    join(comm);
    *async_error = comm->state;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    if (!comm) return fail(nullptr, ncclInvalidArgument, "ncclCommFinalize: no communicator");
    if (comm->busy.load())
        return fail(nullptr, ncclInvalidUsage, "ncclCommFinalize: a call is still in progress");
    join(comm);
    return comm->state;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    join(comm);
    close_fds(comm, false);
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    comm->aborting.store(true); /* a running call sees it within a tick and ends */
    return ncclCommDestroy(comm);
}

const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t comm)
{
    if (comm && !comm->busy.load() && !comm->msg.empty()) return comm->msg.c_str();
    return last_error.c_str();
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
    if (op != ncclSum)
        return fail(comm, ncclInvalidArgument, "ncclAllReduce: the emulator has only ncclSum");
    return collective(comm, OP_ALLREDUCE, sendbuff, recvbuff, count, datatype, 0, "ncclAllReduce",
                      stream);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream)
{
    if (op != ncclSum)
        return fail(comm, ncclInvalidArgument, "ncclReduceScatter: the emulator has only ncclSum");
    return collective(comm, OP_REDUCE_SCATTER, sendbuff, recvbuff, recvcount, datatype, 0,
                      "ncclReduceScatter", stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return collective(comm, OP_ALL_GATHER, sendbuff, recvbuff, sendcount, datatype, 0,
                      "ncclAllGather", stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return collective(comm, OP_BROADCAST, sendbuff, recvbuff, count, datatype, root,
                      "ncclBroadcast", stream);
}
