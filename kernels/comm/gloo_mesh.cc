/* gloo_mesh.cc: Gloo's TCP transport, watched (gloo_mesh.h): pairs that report their failure,
 * unbound buffers whose waits can be aborted, the watch that aborts them, and the mesh's
 * connection through the store.
 * Lock order: a pair's lock (held by Gloo when a pair changes state) before the watch's, before
 * an unbound buffer's (abortWaitSend/abortWaitRecv); nothing takes them the other way round. A
 * buffer is destroyed holding every pair's lock (in rank order, one thread at a time holding
 * more than one), so that no pair failing meanwhile reaches it through a queued send. */
#include "kernels/comm/gloo_mesh.h"

#include <gloo/transport/tcp/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/pair.h>
#include <gloo/transport/tcp/unbound_buffer.h>

#include <algorithm>
#include <string>
#include <utility>

namespace gk_gloo {

namespace tcp = gloo::transport::tcp;
using gloo::transport::UnboundBuffer;

/* ---- the watch ---- */

Watch::~Watch()
{
    if (thread_.joinable()) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            quit_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }
}

void Watch::begin(UnboundBuffer *buf, bool send, int peer)
{
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_)
        throw Aborted(why_, stopped_);
    waiting_.push_back({buf, send, peer});
    if (waiting_.size() == 1)
        cv_.notify_all();
}

void Watch::end(UnboundBuffer *buf)
{
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(waiting_.begin(), waiting_.end(),
                           [buf](const Waiting &w) { return w.buf == buf; });
    if (it != waiting_.end())
        waiting_.erase(it);
    ended_++;
}

void Watch::pair_failed(const std::string &why)
{
    std::lock_guard<std::mutex> lock(mu_);
    if (why_.empty())
        why_ = why;
}

void Watch::aborted()
{
    std::lock_guard<std::mutex> lock(mu_);
    throw Aborted(why_.empty() ? "a wait was aborted" : why_, stopped_);
}

void Watch::abort_locked(const std::string &why, bool stopped)
{
    if (aborted_)
        return;
    aborted_ = true, stopped_ = stopped;
    if (stopped || why_.empty())
        why_ = why;
    for (const Waiting &w : waiting_) {
        if (w.send)
            w.buf->abortWaitSend();
        else
            w.buf->abortWaitRecv();
    }
    cv_.notify_all();
}

void Watch::abort(const std::string &why, bool stopped)
{
    std::lock_guard<std::mutex> lock(mu_);
    abort_locked(why, stopped);
}

void Watch::stop_on(const volatile sig_atomic_t *flag, double grace_s)
{
    std::lock_guard<std::mutex> lock(mu_);
    flag_ = flag;
    grace_ = std::chrono::milliseconds(static_cast<long long>(grace_s * 1e3 + 0.5));
    if (!thread_.joinable())
        thread_ = std::thread(&Watch::run, this);
}

/* The thread: while a wait is pending and the flag is set, aborts once no wait has ended for
 * grace_ (a collective that makes progress is left to finish: the ranks stop together after it). */
void Watch::run()
{
    using clock = std::chrono::steady_clock;
    std::unique_lock<std::mutex> lock(mu_);
    clock::time_point since{};
    bool stalled = false;
    unsigned long seen = ended_;
    while (!quit_) {
        if (waiting_.empty() || aborted_) {
            stalled = false;
            cv_.wait(lock);
            continue;
        }
        if (ended_ != seen)
            seen = ended_, stalled = false;
        if (__atomic_load_n(flag_, __ATOMIC_RELAXED)) {
            if (!stalled)
                since = clock::now(), stalled = true;
            else if (clock::now() - since >= grace_) {
                char why[160];
                snprintf(why, sizeof why, "stopped by a signal: rank %d made no progress for %g s",
                         waiting_.front().peer, static_cast<double>(grace_.count()) / 1e3);
                abort_locked(why, true);
                continue;
            }
        }
        cv_.wait_for(lock, std::chrono::milliseconds(50));
    }
}

/* ---- pairs and buffers ---- */

/* A pair that, when it fails, tells the watch why and aborts the waits of the sends it had queued
 * for the device thread: Gloo fails its pending sends and receives, not those. */
class WatchedPair : public tcp::Pair {
  public:
    WatchedPair(tcp::Context *ctx, tcp::Device *dev, int rank, std::chrono::milliseconds timeout,
                Watch *w)
        : tcp::Pair(ctx, dev, rank, timeout), watch_(w)
    {
    }

    /* Closes as ~Pair would, but before this object stops being a WatchedPair: the device thread
     * may be in handleEvents (a peer closing) and call changeState meanwhile. Closing under the
     * pair's lock unregisters the socket and waits for that thread's tick, so none comes after. */
    ~WatchedPair() override
    {
        std::lock_guard<std::mutex> lock(m_);
        if (state_ != CLOSED)
            tcp::Pair::changeState(CLOSED);
    }

    /* The pair's lock, which Gloo holds while the pair changes state. */
    std::mutex &lock() { return m_; }

  protected:
    /* Gloo calls it with the pair locked; a failure has set ex_ first (signalException). The
     * queued sends' buffers are reached through Gloo's weak pointers, which do not keep a buffer
     * alive: ~Abortable waits for this pair's lock before it destroys one, so a buffer found
     * here lives until this returns, and one destroyed before is not found. */
    void changeState(state next) noexcept override
    {
        if (next == CLOSED && state_ != CLOSED && ex_) {
            try {
                std::rethrow_exception(ex_);
            } catch (const std::exception &x) {
                watch_->pair_failed(x.what());
            } catch (...) {
                watch_->pair_failed("a pair failed");
            }
            for (auto &op : tx_) { /* not written whole: their waits cannot end */
                gloo::NonOwningPtr<tcp::UnboundBuffer> buf(op.ubuf);
                if (buf)
                    buf->abortWaitSend();
            }
        }
        tcp::Pair::changeState(next);
    }

  private:
    Watch *watch_;
};

class Mesh;

/* An unbound buffer whose waits can be aborted (by the watch, or by its pair failing): throws
 * Aborted where Gloo's would return false (its algorithms do not look). Everything else goes to
 * Gloo's buffer. */
class Abortable : public UnboundBuffer {
  public:
    Abortable(std::unique_ptr<UnboundBuffer> in, Watch *w, Mesh *mesh)
        : UnboundBuffer(in->ptr, in->size), in_(std::move(in)), watch_(w), mesh_(mesh)
    {
    }

    ~Abortable() override; /* (after Mesh) */

    bool waitRecv(int *rank, std::chrono::milliseconds timeout) override
    {
        return wait(false, rank, timeout);
    }

    bool waitSend(int *rank, std::chrono::milliseconds timeout) override
    {
        return wait(true, rank, timeout);
    }

    void abortWaitRecv() override { in_->abortWaitRecv(); }
    void abortWaitSend() override { in_->abortWaitSend(); }

    void send(int dst, uint64_t slot, size_t offset, size_t nbytes) override
    {
        to_ = dst;
        in_->send(dst, slot, offset, nbytes);
    }

    void recv(int src, uint64_t slot, size_t offset, size_t nbytes) override
    {
        from_ = src;
        in_->recv(src, slot, offset, nbytes);
    }

    void recv(std::vector<int> srcs, uint64_t slot, size_t offset, size_t nbytes) override
    {
        from_ = srcs.size() == 1 ? srcs[0] : -1;
        in_->recv(std::move(srcs), slot, offset, nbytes);
    }

  private:
    bool wait(bool send, int *rank, std::chrono::milliseconds timeout)
    {
        watch_->begin(in_.get(), send, send ? to_ : from_);
        bool done;
        try {
            done = send ? in_->waitSend(rank, timeout) : in_->waitRecv(rank, timeout);
        } catch (...) {
            watch_->end(in_.get());
            throw;
        }
        watch_->end(in_.get());
        if (!done)
            watch_->aborted();
        return done;
    }

    std::unique_ptr<UnboundBuffer> in_;
    Watch *watch_;
    Mesh *mesh_; /* the context that made it, which outlives its buffers */
    int to_ = -1, from_ = -1;
};

/* Gloo's TCP context with watched pairs and abortable buffers. */
class Mesh : public tcp::Context {
  public:
    Mesh(std::shared_ptr<tcp::Device> dev, int rank, int size, Watch *w)
        : tcp::Context(std::move(dev), rank, size), watch_(w)
    {
    }

    std::unique_ptr<gloo::transport::Pair> &createPair(int rank) override
    {
        pairs_[rank] = std::unique_ptr<gloo::transport::Pair>(
            new WatchedPair(this, device_.get(), rank, getTimeout(), watch_));
        return pairs_[rank];
    }

    std::unique_ptr<UnboundBuffer> createUnboundBuffer(void *ptr, size_t size) override
    {
        return std::unique_ptr<UnboundBuffer>(
            new Abortable(tcp::Context::createUnboundBuffer(ptr, size), watch_, this));
    }

    void fail_all(const std::string &why) { signalException(why); }

    /* Every pair's lock, in rank order (the vector of pairs is fixed once connected). */
    std::vector<std::unique_lock<std::mutex>> lock_pairs()
    {
        std::vector<std::unique_lock<std::mutex>> held;
        for (auto &p : pairs_)
            if (p)
                held.emplace_back(static_cast<WatchedPair *>(p.get())->lock());
        return held;
    }

  private:
    Watch *watch_;
};

Abortable::~Abortable()
{
    auto held = mesh_->lock_pairs();
    in_.reset();
}

/* ---- the mesh ---- */

void MeshContext::connect(gloo::rendezvous::Store &store,
                          const std::shared_ptr<gloo::transport::Device> &dev)
{
    auto tcp_dev = std::dynamic_pointer_cast<tcp::Device>(dev);
    if (!tcp_dev)
        throw std::runtime_error("not a TCP device");
    auto mesh = std::make_shared<Mesh>(tcp_dev, rank, size, watch_);
    mesh->setTimeout(getTimeout());
    std::vector<char> mine; /* the address of each of this rank's pairs, in rank order */
    for (int r = 0; r < size; r++) {
        if (r == rank)
            continue;
        auto bytes = mesh->createPair(r)->address().bytes();
        mine.insert(mine.end(), bytes.begin(), bytes.end());
    }
    store.set(std::to_string(rank), mine);
    for (int r = 0; r < size; r++) {
        if (r == rank)
            continue;
        std::string key = std::to_string(r);
        store.wait({key}, getTimeout());
        std::vector<char> all = store.get(key); /* rank r's, one per other rank */
        size_t each = all.size() / static_cast<size_t>(size - 1);
        size_t at = static_cast<size_t>(rank > r ? rank - 1 : rank) * each;
        if (each == 0 || all.size() % static_cast<size_t>(size - 1))
            throw std::runtime_error("rank " + key + "'s addresses are malformed");
        mesh->getPair(r)->connect(std::vector<char>(all.begin() + static_cast<long>(at),
                                                    all.begin() + static_cast<long>(at + each)));
    }
    device_ = dev;
    transportContext_ = std::move(mesh);
}

void MeshContext::fail_all(const std::string &why)
{
    if (auto mesh = std::dynamic_pointer_cast<Mesh>(transportContext_))
        mesh->fail_all(why);
}

} // namespace gk_gloo
