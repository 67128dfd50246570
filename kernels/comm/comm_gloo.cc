/* comm_gloo.cc: the Gloo comm (comm.h): collectives over TCP among CPU ranks, bootstrapped
 * through the rendezvous store (store.h).
 * The device binds to the interface ifname names (the tool's GLOO_SOCKET_IFNAME; the first, if it
 * lists several, as PyTorch's), else to the address this host reaches the store from
 * (gk_store_local_host: the interface that routes to rank 0, which is 127.0.0.1 when every rank is
 * on one host).
 * Each open takes fresh store keys ("gloo/N/...", N counted per rank; a group's
 * "gloo/GROUP/N/..."), so a store can bootstrap several comms one after another (and groups at
 * once). Collectives run with increasing tags, the same on every rank as long as every rank
 * calls the same collectives in the same order (comm.h's contract).
 * Sums use Gloo's ring allreduce: each chunk is reduced on one rank in a fixed order and then
 * copied to the others, so every rank gets the same bits, run after run. reduce_scatter is a ring
 * of our own on Gloo's transport (scatter_ring): half the traffic of an allreduce.
 * bf16 sums (sum_type GK_BF16) round the floats into a uint16_t buffer of the comm's, run the same
 * ring on it with a bf16 add, and widen the result back.
 * The pairs and the waits of every collective are watched (gloo_mesh.h): a pair that fails aborts
 * its queued sends too, and a stop flag (gk_comm_stop_on) aborts a collective in which no wait
 * has ended for a grace period.
 * No C++ exception leaves this file: a Gloo failure becomes GK_EIO with one line naming the
 * ranks that are gone (asked of the store) or, after a timeout, those that are stuck (the ranks
 * that did not report the same timeout), and the comm fails every later call at once (and every
 * pair, so that the other ranks see it leave).
 * Started collectives (allreduce_start, reduce_scatter_start, all_gather_start) run on a thread
 * of the comm, one after another in the order started; the calling thread makes no other
 * collective until allreduce_wait or started_wait (comm.h), so Gloo and the store are never used
 * by two threads at once.
 * Opening a comm sets SIGPIPE to be ignored when it has its default action (see ignore_sigpipe). */
#include "kernels/comm/comm.h"

#include "kernels/bf16.h"
#include "kernels/comm/gloo_mesh.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

/* A store failure inside Gloo: its message already names the store's address. */
struct StoreError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/* The rendezvous store as Gloo's bootstrap sees it: keys under prefix. */
class Store : public gloo::rendezvous::Store {
  public:
    Store(gk_store *s, std::string prefix) : s_(s), prefix_(std::move(prefix)) {}

    void set(const std::string &key, const std::vector<char> &data) override
    {
        gk_err e{};
        if (gk_store_set(s_, (prefix_ + key).c_str(), data.data(), data.size(), &e))
            throw StoreError(e.msg);
    }

    std::vector<char> get(const std::string &key) override
    {
        gk_err e{};
        void *val = nullptr;
        size_t n = 0;
        if (gk_store_get(s_, (prefix_ + key).c_str(), &val, &n, &e))
            throw StoreError(e.msg);
        std::vector<char> out(static_cast<char *>(val), static_cast<char *>(val) + n);
        free(val);
        return out;
    }

    void wait(const std::vector<std::string> &keys) override
    {
        std::vector<std::string> full;
        std::vector<const char *> ptrs;
        for (const auto &k : keys)
            full.push_back(prefix_ + k);
        for (const auto &k : full)
            ptrs.push_back(k.c_str());
        gk_err e{};
        if (gk_store_wait(s_, ptrs.data(), static_cast<int>(ptrs.size()), &e))
            throw StoreError(e.msg);
    }

    /* The store's own timeout (the comm's, in practice) bounds the wait. */
    void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &) override
    {
        wait(keys);
    }

  private:
    gk_store *s_;
    std::string prefix_;
};

struct Gloo {
    gk_gloo::Watch watch; /* first: the pairs report to it until they are destroyed */
    gk_store *store = nullptr;
    std::string ifname; /* the interface to bind to, or empty */
    std::string group;  /* gk_comm_open_group's name, or empty: the whole run */
    std::chrono::milliseconds timeout{0};
    /* the buffers collectives send from and receive into, declared before the transport so that
     * they are destroyed after it: after a failed collective a pair may still be sending from
     * them until the device's loop thread is joined */
    std::vector<float> scratch;
    std::vector<uint16_t> wire; /* bf16 sums' buffer */
    std::shared_ptr<gloo::transport::Device> dev; /* declared before ctx: destroyed after it */
    std::shared_ptr<gk_gloo::MeshContext> ctx;
    char prefix[64] = {0}; /* of its store keys: "gloo/N/", "gloo/GROUP/N/" */
    uint32_t tag = 0;      /* the next collective's */
    bool broken = false;
    char why[900] = {0}; /* the failure that broke it */
    /* started sums (allreduce_start), run in order by `worker`, which the calling thread hands
     * the comm to until allreduce_wait: the two never run collectives at the same time */
    std::thread worker;
    std::mutex mu;
    std::condition_variable cv;
    enum Kind { ALLREDUCE, REDUCE_SCATTER, ALL_GATHER };
    struct Started {
        Kind kind;
        const float *in; /* reduce_scatter's and all_gather's (allreduce: of out, in place) */
        float *out;
        size_t n;
    };
    std::deque<Started> queue; /* the one running stays at the front until it has ended */
    bool running = false, quit = false; /* guarded by mu */
    gk_err started_err{};               /* the first failure of a started sum (under mu) */
};

Gloo *impl(gk_comm *c) { return static_cast<Gloo *>(c->impl); }

/* Gloo's message, one line, without the "[file.cc:123] " it starts with. */
void one_line(const char *msg, char *out, size_t cap)
{
    const char *close = msg[0] == '[' ? strstr(msg, "] ") : nullptr;
    if (close && memchr(msg, ':', static_cast<size_t>(close - msg)))
        msg = close + 2;
    snprintf(out, cap, "%.*s", static_cast<int>(strcspn(msg, "\n")), msg);
}

/* Who is gone, for a failure's message: "rank 1 is gone" (those that left after it follow:
 * "rank 1 is gone (then 2, 3)"), the store itself, or that every rank is still connected. A rank
 * that just died may not have reached the store's books yet: patient asks again for a second.
 * Returns how many are gone, -1 when the store is. */
int who_is_gone(gk_store *store, bool patient, char *out, size_t cap)
{
    int gone[8], n = 0;
    gk_err e{};
    for (int tries = 0; tries < (patient ? 20 : 1); tries++) {
        if ((n = gk_store_gone(store, gone, 8, &e)) != 0)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (n < 0) {
        snprintf(out, cap, "rank 0 (the store at %s) is gone", gk_store_address(store));
        return n;
    }
    if (n == 0) {
        snprintf(out, cap, "every rank is still connected to the store");
        return n;
    }
    size_t len = static_cast<size_t>(snprintf(out, cap, "rank %d is gone", gone[0]));
    for (int i = 1; i < n && i < 8 && len < cap; i++)
        len += static_cast<size_t>(snprintf(out + len, cap - len, "%s%d", i == 1 ? " (then " : ", ",
                                            gone[i]));
    if (n > 1 && len < cap)
        snprintf(out + len, cap - len, "%s)", n > 8 ? ", ..." : "");
    return n;
}

/* After a timeout with every rank still connected, names the ranks that are stuck: each rank
 * whose collective timed out says so in the store, and those that have not within 2 s are
 * "not responding". Returns 0, or -1 when it cannot tell (the store fails, or all timed out). */
int who_is_stuck(gk_comm *c, char *out, size_t cap)
{
    Gloo *g = impl(c);
    char key[96];
    gk_err e{};
    int stuck[8], n = 0;
    snprintf(key, sizeof key, "%stimeout/%u/%d", g->prefix, g->tag - 1, c->rank);
    if (gk_store_set(g->store, key, "", 0, &e))
        return -1;
    for (int tries = 0; tries < 40; tries++) {
        n = 0;
        for (int r = 0; r < c->world; r++) {
            snprintf(key, sizeof key, "%stimeout/%u/%d", g->prefix, g->tag - 1, r);
            int rc = gk_store_check(g->store, key, &e);
            if (rc < 0)
                return -1;
            if (rc == 0 && n++ < 8)
                stuck[n - 1] = r;
        }
        if (n == 0)
            return -1;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    bool grouped = !g->group.empty(); /* (its ranks are the group's) */
    size_t len = static_cast<size_t>(snprintf(out, cap, "%s%s%srank%s %d", grouped ? "group " : "",
                                              g->group.c_str(), grouped ? "'s " : "",
                                              n > 1 ? "s" : "", stuck[0]));
    for (int i = 1; i < n && i < 8 && len < cap; i++)
        len += static_cast<size_t>(snprintf(out + len, cap - len, ", %d", stuck[i]));
    if (len < cap)
        snprintf(out + len, cap - len, "%s %s not responding", n > 8 ? ", ..." : "",
                 n > 1 ? "are" : "is");
    return 0;
}

/* Breaks the comm: "allreduce: rank 1 is gone: Connection closed by peer [10.0.0.2]:41234",
 * "allreduce: rank 1 is not responding: Timed out waiting 300000ms for recv operation ...",
 * "allreduce: stopped by a signal: rank 1 made no progress for 5 s" (stopped). Every pair is
 * failed, so that the other ranks see this one leave at once and nothing sends on. */
int fail(gk_comm *c, const char *what, const char *msg, bool stopped, gk_err *e)
{
    Gloo *g = impl(c);
    char line[600], gone[200];
    one_line(msg, line, sizeof line);
    bool timeout = strstr(line, "Timed out") != nullptr;
    if (stopped)
        snprintf(g->why, sizeof g->why, "%s: %s", what, line);
    else {
        if (who_is_gone(g->store, !timeout, gone, sizeof gone) == 0 && timeout)
            who_is_stuck(c, gone, sizeof gone);
        snprintf(g->why, sizeof g->why, "%s: %s: %s", what, gone, line);
    }
    g->broken = true;
    g->watch.abort(line, stopped);
    try {
        g->ctx->fail_all(line);
    } catch (...) {
    }
    return gk_errf(e, GK_EIO, "%s", g->why);
}

/* Runs one collective f(g) unless the comm is broken; any exception breaks it. */
template <class F> int guarded(gk_comm *c, const char *what, gk_err *e, F f)
{
    Gloo *g = impl(c);
    if (g->broken)
        return gk_errf(e, GK_EIO, "%s: the comm failed earlier: %s", what, g->why);
    try {
        f(g);
        return 0;
    } catch (const gk_gloo::Aborted &x) {
        return fail(c, what, x.what(), x.stopped, e);
    } catch (const std::exception &x) {
        return fail(c, what, x.what(), false, e);
    } catch (...) {
        return fail(c, what, "unknown exception", false, e);
    }
}

template <class T> void sum_ring(Gloo *g, T *buf, size_t n)
{
    gloo::AllreduceOptions o(g->ctx);
    o.setOutput(buf, n);
    o.setReduceFunction(static_cast<void (*)(void *, const void *, const void *, size_t)>(
        &gloo::sum<T>));
    o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    o.setTag(g->tag++);
    o.setTimeout(g->timeout);
    gloo::allreduce(o);
}

/* Gloo's reduce function for bf16 sums: c = a + b, rounded to bf16. */
void sum_bf16(void *c, const void *a, const void *b, size_t n)
{
    uint16_t *out = static_cast<uint16_t *>(c);
    const uint16_t *x = static_cast<const uint16_t *>(a), *y = static_cast<const uint16_t *>(b);
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        out[i] = gk_f2bf16(gk_bf16f(x[i]) + gk_bf16f(y[i]));
}

/* g->wire (n bf16) = the sum over ranks of every rank's in (n floats), in bf16. */
void sum_ring_bf16(Gloo *g, const float *in, size_t n)
{
    g->wire.resize(n);
    uint16_t *w = g->wire.data();
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        w[i] = gk_f2bf16(in[i]);
    gloo::AllreduceOptions o(g->ctx);
    o.setOutput(w, n);
    o.setReduceFunction(sum_bf16);
    o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    o.setTag(g->tag++);
    o.setTimeout(g->timeout);
    gloo::allreduce(o);
}

void widen(const uint16_t *w, float *out, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        out[i] = gk_bf16f(w[i]);
}

int gloo_allreduce(gk_comm *c, float *buf, size_t n, gk_err *e)
{
    if (n == 0)
        return 0;
    return guarded(c, "allreduce", e, [&](Gloo *g) {
        if (c->sum_type != GK_BF16)
            return sum_ring(g, buf, n);
        sum_ring_bf16(g, buf, n);
        widen(g->wire.data(), buf, n);
    });
}

int gloo_allreduce_host(gk_comm *c, double *vals, int n, gk_err *e)
{
    if (n <= 0)
        return 0;
    return guarded(c, "allreduce", e, [&](Gloo *g) { sum_ring(g, vals, static_cast<size_t>(n)); });
}

int gloo_reduce_scatter(gk_comm *c, const float *in, float *out, size_t count, gk_err *e);
int gloo_all_gather(gk_comm *c, const float *in, float *out, size_t count, gk_err *e);

/* The worker: runs each started collective in turn, keeping the first failure for the wait. */
void run_started(gk_comm *c)
{
    Gloo *g = impl(c);
    std::unique_lock<std::mutex> lock(g->mu);
    for (;;) {
        g->cv.wait(lock, [g] { return g->quit || !g->queue.empty(); });
        if (g->queue.empty())
            return;
        Gloo::Started job = g->queue.front();
        g->running = true;
        lock.unlock();
        gk_err e{};
        int rc = job.kind == Gloo::REDUCE_SCATTER
                     ? gloo_reduce_scatter(c, job.in, job.out, job.n, &e)
                 : job.kind == Gloo::ALL_GATHER ? gloo_all_gather(c, job.in, job.out, job.n, &e)
                                                : gloo_allreduce(c, job.out, job.n, &e);
        lock.lock();
        g->queue.pop_front();
        g->running = false;
        if (rc && !g->started_err.code)
            g->started_err = e;
        g->cv.notify_all();
    }
}

/* Queues a collective for the worker (started first). */
int start_collective(gk_comm *c, Gloo::Kind kind, const float *in, float *out, size_t n, gk_err *e)
{
    static const char *const names[] = {"allreduce", "reduce_scatter", "all_gather"};
    Gloo *g = impl(c);
    try {
        if (!g->worker.joinable())
            g->worker = std::thread(run_started, c);
        std::lock_guard<std::mutex> lock(g->mu);
        g->queue.push_back(Gloo::Started{kind, in, out, n});
    } catch (const std::exception &x) {
        return gk_errf(e, GK_ENOMEM, "%s: cannot start it: %s", names[kind], x.what());
    }
    g->cv.notify_all();
    return 0;
}

int gloo_allreduce_start(gk_comm *c, float *buf, size_t n, gk_err *e)
{
    return start_collective(c, Gloo::ALLREDUCE, NULL, buf, n, e);
}

int gloo_reduce_scatter_start(gk_comm *c, const float *in, float *out, size_t n, gk_err *e)
{
    return start_collective(c, Gloo::REDUCE_SCATTER, in, out, n, e);
}

int gloo_all_gather_start(gk_comm *c, const float *in, float *out, size_t n, gk_err *e)
{
    return start_collective(c, Gloo::ALL_GATHER, in, out, n, e);
}

int gloo_started_wait(gk_comm *c, int keep, gk_err *e)
{
    Gloo *g = impl(c);
    size_t k = keep > 0 ? (size_t)keep : 0;
    std::unique_lock<std::mutex> lock(g->mu);
    g->cv.wait(lock, [g, k] { return g->queue.size() <= k && (k || !g->running); });
    if (!g->started_err.code)
        return g->broken ? gk_errf(e, GK_EIO, "allreduce: the comm failed earlier: %s", g->why) : 0;
    *e = g->started_err;
    g->started_err = gk_err{};
    return e->code;
}

int gloo_allreduce_wait(gk_comm *c, gk_err *e)
{
    return gloo_started_wait(c, 0, e);
}

/* Ring reduce-scatter, in world - 1 steps: at step s, this rank sends the running sum of part
 * (rank - s - 1) to the next rank and receives that of part (rank - s - 2) from the one before,
 * adding its own share of that part; the last step leaves part `rank` summed over all ranks, in
 * the order rank + 1, rank + 2, ..., rank. A rank sends a step's part only once its last one has
 * arrived, so one slot serves every step. T is the wire type: float, or uint16_t for bf16 sums,
 * where own() rounds this rank's floats and each partial sum is rounded (sum_bf16), as the
 * allreduce does; own(dst, part) puts this rank's count elements of that part at dst. */
template <class T, class Own, class Add>
const T *scatter_ring(Gloo *g, gk_comm *c, std::vector<T> &buf, size_t count, Own own, Add add)
{
    int world = c->world, rank = c->rank, next = (rank + 1) % world;
    int prev = (rank + world - 1) % world;
    size_t bytes = count * sizeof(T);
    buf.resize(3 * count); /* [the sum being sent | the next one | the one received] */
    T *send = buf.data(), *sum = send + count, *got = sum + count;
    auto slot = gloo::Slot::build(0x5c, g->tag++);
    auto send_ub = g->ctx->createUnboundBuffer(send, bytes);
    auto sum_ub = g->ctx->createUnboundBuffer(sum, bytes);
    auto got_ub = g->ctx->createUnboundBuffer(got, bytes);
    own(send, static_cast<size_t>((rank + world - 1) % world));
    for (int s = 0; s < world - 1; s++) {
        got_ub->recv(prev, slot);
        send_ub->send(next, slot);
        own(sum, static_cast<size_t>((rank - s - 2 + 2 * world) % world));
        got_ub->waitRecv(g->timeout);
        add(sum, sum, got, count);
        send_ub->waitSend(g->timeout);
        std::swap(send, sum);
        std::swap(send_ub, sum_ub);
    }
    return send; /* the last sum, swapped in */
}

/* Elements of a part that one ring of reduce_scatter moves (4 MB of floats). */
#define SCATTER_CHUNK ((size_t)1 << 20)

int gloo_reduce_scatter(gk_comm *c, const float *in, float *out, size_t count, gk_err *e)
{
    if (count == 0)
        return 0;
    if (c->world == 1) {
        memmove(out, in, count * sizeof *out);
        return 0;
    }
    /* in rings of at most SCATTER_CHUNK elements a part, so that the scratch stays small (3 x
     * the chunk) whatever count is; in place, a chunk's result overwrites only what was read */
    return guarded(c, "reduce_scatter", e, [&](Gloo *g) {
        for (size_t off = 0; off < count; off += SCATTER_CHUNK) {
            size_t n = count - off < SCATTER_CHUNK ? count - off : SCATTER_CHUNK;
            const float *at = in + off;
            if (c->sum_type != GK_BF16) {
                auto own = [&](float *dst, size_t part) {
                    memcpy(dst, at + part * count, n * sizeof *dst);
                };
                auto add = static_cast<void (*)(void *, const void *, const void *, size_t)>(
                    &gloo::sum<float>);
                memcpy(out + off, scatter_ring(g, c, g->scratch, n, own, add), n * sizeof *out);
                continue;
            }
            auto own = [&](uint16_t *dst, size_t part) {
#pragma omp simd
                for (size_t i = 0; i < n; i++)
                    dst[i] = gk_f2bf16(at[part * count + i]);
            };
            widen(scatter_ring(g, c, g->wire, n, own, sum_bf16), out + off, n);
        }
    });
}

int gloo_all_gather(gk_comm *c, const float *in, float *out, size_t count, gk_err *e)
{
    if (count == 0)
        return 0;
    return guarded(c, "all_gather", e, [&](Gloo *g) {
        gloo::AllgatherOptions o(g->ctx);
        if (in != out + count * static_cast<size_t>(c->rank)) /* else in place */
            o.setInput(const_cast<float *>(in), count);
        o.setOutput(out, count * static_cast<size_t>(c->world));
        o.setTag(g->tag++);
        o.setTimeout(g->timeout);
        gloo::allgather(o);
    });
}

int gloo_broadcast(gk_comm *c, void *buf, size_t n, int root, gk_err *e)
{
    if (root < 0 || root >= c->world)
        return gk_errf(e, GK_EUSAGE, "broadcast: root %d of %d ranks", root, c->world);
    if (n == 0)
        return 0;
    return guarded(c, "broadcast", e, [&](Gloo *g) {
        gloo::BroadcastOptions o(g->ctx);
        o.setOutput(static_cast<unsigned char *>(buf), n);
        o.setRoot(root);
        o.setTag(g->tag++);
        o.setTimeout(g->timeout);
        gloo::broadcast(o);
    });
}

int gloo_barrier(gk_comm *c, gk_err *e)
{
    return guarded(c, "barrier", e, [&](Gloo *g) {
        gloo::BarrierOptions o(g->ctx);
        o.setTag(g->tag++);
        o.setTimeout(g->timeout);
        gloo::barrier(o);
    });
}

void gloo_close(gk_comm *c)
{
    Gloo *g = impl(c);
    if (g->worker.joinable()) {
        {
            std::lock_guard<std::mutex> lock(g->mu);
            g->quit = true;
        }
        g->cv.notify_all();
        g->worker.join(); /* after the sums started: each ends or fails within the timeout */
    }
    delete g;
    delete c;
}

const gk_comm_ops gloo_ops = {
    "gloo",         gloo_allreduce, gloo_allreduce_host, gloo_reduce_scatter,  gloo_all_gather,
    gloo_broadcast, gloo_barrier,   gloo_close,          gloo_allreduce_start, gloo_allreduce_wait,
    gloo_reduce_scatter_start, gloo_started_wait, gloo_all_gather_start,
};

/* The device's address: ifname's first interface, else the store connection's. */
gloo::transport::tcp::attr device_attr(gk_store *store, const std::string &ifname)
{
    gloo::transport::tcp::attr attr;
    if (!ifname.empty())
        attr.iface = ifname.substr(0, ifname.find(','));
    else
        attr.hostname = gk_store_local_host(store);
    return attr;
}

/* Connects rank to every other through the store; on failure *e is set and it throws nothing. */
int open_gloo(Gloo *g, int rank, int world, gk_err *e)
{
    try {
        int64_t opens = 0;
        char key[64];
        std::string group = g->group.empty() ? "" : g->group + "/";
        snprintf(key, sizeof key, "gloo/%sopens/%d", group.c_str(), rank);
        if (gk_store_add(g->store, key, 1, &opens, e))
            return e->code;
        g->dev = gloo::transport::tcp::CreateDevice(device_attr(g->store, g->ifname));
        g->ctx = std::make_shared<gk_gloo::MeshContext>(rank, world, &g->watch);
        g->ctx->setTimeout(g->timeout);
        snprintf(g->prefix, sizeof g->prefix, "gloo/%s%lld/", group.c_str(),
                 static_cast<long long>(opens));
        Store store(g->store, g->prefix);
        g->ctx->connect(store, g->dev);
        return 0;
    } catch (const StoreError &x) {
        return gk_errf(e, GK_EIO, "%s", x.what());
    } catch (const std::exception &x) {
        char line[900];
        one_line(x.what(), line, sizeof line);
        return gk_errf(e, GK_EIO, "gloo: %s", line);
    } catch (...) {
        return gk_errf(e, GK_EIO, "gloo: unknown exception");
    }
}

/* Gloo writes to its sockets without MSG_NOSIGNAL (its own tests ignore SIGPIPE; so does Python,
 * for PyTorch): with SIGPIPE's default action, a peer gone mid-write would kill this process
 * instead of failing the collective. A handler the program installed is left alone. */
void ignore_sigpipe()
{
    struct sigaction old;
    if (sigaction(SIGPIPE, nullptr, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
        old.sa_handler == SIG_DFL)
        signal(SIGPIPE, SIG_IGN);
}

} // namespace

extern "C" int gk_comm_gloo_stop_on(gk_comm *c, const volatile sig_atomic_t *flag, double grace_s,
                                   gk_err *e)
{
    try {
        impl(c)->watch.stop_on(flag, grace_s);
        return 0;
    } catch (const std::exception &x) {
        return gk_errf(e, GK_ENOMEM, "gloo: cannot start the stop watch: %s", x.what());
    }
}

extern "C" int gk_comm_open_gloo(gk_comm **out, gk_store *store, int rank, int world,
                                 double timeout_s, const char *ifname, gk_err *e)
{
    return gk_comm_open_gloo_group(out, store, nullptr, rank, world, timeout_s, ifname, e);
}

extern "C" int gk_comm_open_gloo_group(gk_comm **out, gk_store *store, const char *group,
                                       int rank, int world, double timeout_s, const char *ifname,
                                       gk_err *e)
{
    *out = nullptr;
    if (!store || world < 1 || rank < 0 || rank >= world || !(timeout_s > 0))
        return gk_errf(e, GK_EUSAGE, "gloo: rank %d of %d with a timeout of %g s: out of range",
                       rank, world, timeout_s);
    Gloo *g = new (std::nothrow) Gloo;
    gk_comm *c = new (std::nothrow) gk_comm{};
    if (!g || !c) {
        delete g;
        delete c;
        return gk_errf(e, GK_ENOMEM, "out of memory");
    }
    ignore_sigpipe();
    g->store = store;
    g->ifname = ifname ? ifname : "";
    g->group = group ? group : "";
    g->timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3 + 0.5));
    int rc = open_gloo(g, rank, world, e);
    if (rc) {
        delete g;
        delete c;
        return rc;
    }
    c->ops = &gloo_ops;
    c->rank = rank, c->world = world;
    c->impl = g;
    *out = c;
    return 0;
}
