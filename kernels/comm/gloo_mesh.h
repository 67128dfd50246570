/* gloo_mesh.h: the transport under comm_gloo.cc: Gloo's TCP pairs in a full mesh, watched so that
 * a collective never waits on a peer that is gone. Gloo fails a pair whose peer closed, and the
 * sends and receives it had pending, but not a send it had queued on a full socket: that one
 * waited for the whole timeout: here a pair that fails aborts those (and only those: a transfer
 * already done still counts). Every wait of a collective (on the unbound buffers Gloo's
 * algorithms create) is registered with a Watch, and a stop flag set while no wait has ended for
 * a grace period aborts them all. An aborted wait throws Aborted.
 * Owns: the Watch owns its thread (stop_on); MeshContext owns the pairs. The Watch must outlive
 * the context (pairs report to it). Thread safety: the Watch is called from the collectives'
 * thread, Gloo's device thread (a pair failing) and its own; the mesh as Gloo's contexts are. */
#ifndef GK_GLOO_MESH_H
#define GK_GLOO_MESH_H

#include <gloo/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace gk_gloo {

/* A collective's wait ended by the Watch; stopped: by the stop flag, else a pair failed. */
struct Aborted : std::runtime_error {
    Aborted(const std::string &why, bool stopped) : std::runtime_error(why), stopped(stopped) {}
    bool stopped;
};

class Watch {
  public:
    ~Watch();
    /* A wait on buf (its send or its receive, with peer) begins; throws Aborted when it is over. */
    void begin(gloo::transport::UnboundBuffer *buf, bool send, int peer);
    void end(gloo::transport::UnboundBuffer *buf);
    /* A pair failed (why: Gloo's message): the reason an aborted send gives. */
    void pair_failed(const std::string &why);
    /* Throws Aborted with the reason (a wait returned aborted). */
    [[noreturn]] void aborted();
    /* Aborts every wait, now and later, with why (the first reason stays, but for stopped). */
    void abort(const std::string &why, bool stopped);
    /* From now on, *flag set (by a signal handler) aborts a wait after grace_s seconds in which
     * no wait of a collective ended. Starts the watch's thread; throws std::system_error. */
    void stop_on(const volatile sig_atomic_t *flag, double grace_s);

  private:
    struct Waiting {
        gloo::transport::UnboundBuffer *buf;
        bool send;
        int peer;
    };
    void abort_locked(const std::string &why, bool stopped);
    void run();

    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<Waiting> waiting_;
    unsigned long ended_ = 0; /* waits ended so far: progress */
    bool aborted_ = false, stopped_ = false, quit_ = false;
    std::string why_;
    const volatile sig_atomic_t *flag_ = nullptr;
    std::chrono::milliseconds grace_{0};
    std::thread thread_;
};

/* A gloo::Context whose pairs and buffers report to a Watch. */
class MeshContext : public gloo::Context {
  public:
    MeshContext(int rank, int size, Watch *w) : gloo::Context(rank, size), watch_(w) {}
    /* Connects to every other rank, exchanging addresses through store (keys "R": rank R's
     * addresses, as Gloo's connectFullMesh); throws on failure. dev: a TCP device. */
    void connect(gloo::rendezvous::Store &store,
                 const std::shared_ptr<gloo::transport::Device> &dev);
    /* Fails every pair with why (their peers see them closed). */
    void fail_all(const std::string &why);

  private:
    Watch *watch_;
};

} // namespace gk_gloo

#endif
