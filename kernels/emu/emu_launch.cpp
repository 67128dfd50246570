/* emu_launch.cpp: one kernel launch, from GK_LAUNCH to its last block.
 * Owns: the sm_90 launch checks, fault injection (GPT_EMU_FAIL_LAUNCH), the host thread pool that
 * runs blocks in parallel (GK_EMU_THREADS), each host thread's dynamic shared memory with the
 * guard after it, and the SIGSEGV handler that turns a touch of a guard (shared memory past its
 * end, a thread's stack overflowing) into a launch error. Any other fault goes on to the handler
 * that was there before (or the default: a crash, as without the emulator). */
#undef _FORTIFY_SOURCE /* siglongjmp from the handler's stack */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include <condition_variable>
#include <thread>

#include "kernels/emu/emu_internal.h"

namespace gk_emu {

/* ---- faults ---- */

enum { kMaxWorkers = 256 };
static Worker *registry[kMaxWorkers]; /* the handler finds the faulting thread's Worker here */
static struct sigaction previous_segv;
static bool handler_installed;

static void chain_segv(int sig, siginfo_t *si, void *uc)
{
    if (previous_segv.sa_flags & SA_SIGINFO) {
        previous_segv.sa_sigaction(sig, si, uc);
    } else if (previous_segv.sa_handler == SIG_DFL || previous_segv.sa_handler == SIG_IGN) {
        sigaction(SIGSEGV, &previous_segv, nullptr); /* the access faults again, with the default */
    } else {
        previous_segv.sa_handler(sig);
    }
}

static void segv_handler(int sig, siginfo_t *si, void *uc)
{
    char *a = static_cast<char *>(si->si_addr);
    pthread_t self = pthread_self();
    for (int i = 0; i < kMaxWorkers; i++) {
        Worker *w = __atomic_load_n(&registry[i], __ATOMIC_ACQUIRE);
        if (!w || !w->running || !pthread_equal(w->owner, self)) continue;
        const Thread *t = w->cur;
        if (a >= w->smem_guard && a < w->smem_guard + kSmemGuard) w->fault_kind = 1;
        else if (t && t->fiber && a >= t->fiber->map && a < t->fiber->map + t->fiber->guard)
            w->fault_kind = 2;
        else break;
        w->fault_addr = a;
        siglongjmp(w->fault, 1);
    }
    chain_segv(sig, si, uc);
}

static void install_handler()
{
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = segv_handler;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        handler_installed = sigaction(SIGSEGV, &sa, &previous_segv) == 0;
    });
}

enum : size_t { kAltStack = 64 * 1024 };

static size_t smem_cap()
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (kMaxSmemOptin + page - 1) / page * page;
}

void release_worker()
{
    Worker *w = tls_worker;
    if (!w) return;
    for (int i = 0; i < kMaxWorkers; i++) {
        Worker *me = w;
        __atomic_compare_exchange_n(&registry[i], &me, nullptr, false, __ATOMIC_RELEASE,
                                    __ATOMIC_RELAXED);
    }
    if (w->altstack) {
        stack_t off;
        memset(&off, 0, sizeof off);
        off.ss_flags = SS_DISABLE;
        sigaltstack(&off, nullptr);
        munmap(w->altstack, kAltStack);
    }
    if (w->smem_map) munmap(w->smem_map, smem_cap() + kSmemGuard);
    fiber_free_all(w);
    delete w;
    tls_worker = nullptr;
}

/* Once per host thread: its place in the registry, an alternate signal stack (a stack overflow
 * leaves none to run the handler on) and its shared memory. False when any of it fails. */
static bool prepare_worker(Worker *w)
{
    if (w->smem_map) return true;
    stack_t ss;
    if (sigaltstack(nullptr, &ss) == 0 && (ss.ss_flags & SS_DISABLE)) {
        void *alt =
            mmap(nullptr, kAltStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (alt == MAP_FAILED) return false;
        ss.ss_sp = alt;
        ss.ss_size = kAltStack;
        ss.ss_flags = 0;
        if (sigaltstack(&ss, nullptr) == 0) w->altstack = (char *)alt;
        else munmap(alt, kAltStack);
    }
    void *map = mmap(nullptr, smem_cap() + kSmemGuard, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return false;
    if (mprotect((char *)map + smem_cap(), kSmemGuard, PROT_NONE) != 0) {
        munmap(map, smem_cap() + kSmemGuard);
        return false;
    }
    w->smem_map = (char *)map;
    w->smem_guard = w->smem_map + smem_cap();
    for (int i = 0; i < kMaxWorkers; i++) {
        Worker *none = nullptr;
        if (__atomic_compare_exchange_n(&registry[i], &none, w, false, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
            break;
    }
    return true;
}

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

static void record_block_error(Grid *g, uint64_t block, const std::string &msg)
{
    std::lock_guard<std::mutex> lock(g->mu);
    if (block < g->err_block) {
        g->err_block = block;
        g->err = msg;
    }
    g->failed = true;
}

/* After the handler jumped out of a kernel thread: the block's error from what it touched. */
static void fault_to_error(Worker *w, Grid *g)
{
    char what[256];
    size_t smem = g->spec->smem;
    if (w->fault_kind == 1)
        snprintf(what, sizeof what,
                 "dynamic shared memory access out of bounds: %zu "
                 "bytes past the end of the %zu bytes launched",
                 (size_t)(w->fault_addr - w->smem_guard) + round16(smem) - smem, smem);
    else
        snprintf(what, sizeof what,
                 "thread stack overflow (GK_EMU_STACK_KB, default 128, sets its size)");
    w->failed = false;
    fail_block(w, w->cur, what);
    record_block_error(g, w->block, w->msg);
}

/* Runs blocks of g on this host thread until none is left or one failed. */
static void run_blocks(Worker *w, Grid *g)
{
    const LaunchSpec &s = *g->spec;
    w->grid = g;
    blockDim = uint3{s.block.x, s.block.y, s.block.z};
    gridDim = uint3{s.grid.x, s.grid.y, s.grid.z};
    if (!prepare_worker(w)) {
        record_block_error(g, 0,
                           std::string("kernel '") + s.name +
                               "': no memory for the emulator's shared memory");
        return;
    }
    w->smem = w->smem_guard - round16(s.smem);
    memset(w->smem, 0xff, s.smem); /* what the last kernel left: never zeros to rely on */
    race_launch(w, s);
    if (sigsetjmp(w->fault, 0)) {
        w->running = 0;
        race_launch_done(w);
        fault_to_error(w, g);
        recycle_fibers(w);
        w->cur = nullptr;
        return;
    }
    for (;;) {
        if (g->failed) break;
        uint64_t b = g->next.fetch_add(1);
        if (b >= g->nblocks) break;
        if (g->order != ORDER_FORWARD) b = g->nblocks - 1 - b;
        w->block = b;
        w->running = 1;
        run_block(w, b);
        w->running = 0;
        if (w->failed) {
            record_block_error(g, b, w->msg);
            recycle_fibers(w);
            break;
        }
    }
    race_launch_done(w);
}

/* ---- the pool ---- */

struct Pool {
    std::mutex mu, in_use;
    std::condition_variable wake, done;
    std::vector<std::thread> threads;
    Grid *job = nullptr;
    uint64_t generation = 0;
    int busy = 0;
    bool stop = false;
};
static Pool *pool;

/* GK_EMU_THREADS, else the CPUs this process may run on. */
static int pool_threads()
{
    static const int n = [] {
        cpu_set_t set;
        int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
        return env_int("GK_EMU_THREADS", cpus > 0 ? cpus : 1, 1, 256);
    }();
    return n;
}

/* A forked child has none of the pool's threads: it starts its own pool if it launches. */
static void forget_pool_in_child() { pool = nullptr; }

static void pool_main(Pool *p)
{
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(p->mu);
    for (;;) {
        p->wake.wait(lock, [&] { return p->stop || p->generation != seen; });
        if (p->stop) break;
        seen = p->generation;
        Grid *g = p->job;
        lock.unlock();
        run_blocks(this_worker(), g);
        lock.lock();
        if (--p->busy == 0) p->done.notify_all();
    }
    lock.unlock();
    release_worker();
}

/* Runs g on the pool and this thread; false when the pool is busy with another launch. */
static bool run_on_pool(Grid *g)
{
    static std::mutex create;
    {
        std::lock_guard<std::mutex> lock(create);
        static bool atfork = pthread_atfork(nullptr, nullptr, forget_pool_in_child) == 0;
        (void)atfork;
        if (!pool) {
            pool = new Pool;
            for (int i = 1; i < pool_threads(); i++) pool->threads.emplace_back(pool_main, pool);
        }
    }
    if (!pool->in_use.try_lock()) return false;
    {
        std::lock_guard<std::mutex> lock(pool->mu);
        pool->job = g;
        pool->generation++;
        pool->busy = (int)pool->threads.size();
    }
    pool->wake.notify_all();
    run_blocks(this_worker(), g);
    {
        std::unique_lock<std::mutex> lock(pool->mu);
        pool->done.wait(lock, [] { return pool->busy == 0; });
        pool->job = nullptr;
    }
    pool->in_use.unlock();
    return true;
}

/* The library may be dlclosed: no thread or handler of it may outlive it. */
__attribute__((destructor)) static void shut_down()
{
    if (pool) {
        {
            std::lock_guard<std::mutex> lock(pool->mu);
            pool->stop = true;
        }
        pool->wake.notify_all();
        for (std::thread &t : pool->threads) t.join();
    }
    if (handler_installed) sigaction(SIGSEGV, &previous_segv, nullptr);
}

/* ---- the launch ---- */

static cudaError_t check_config(const LaunchSpec &s, char *why, size_t n)
{
    const dim3 &b = s.block, &g = s.grid;
    uint64_t threads = (uint64_t)b.x * b.y * b.z;
    if (!b.x || !b.y || !b.z || b.x > 1024 || b.y > 1024 || b.z > 64 ||
        threads > kMaxThreadsPerBlock) {
        snprintf(why, n,
                 "block (%u,%u,%u) is not within sm_90's limits "
                 "(dims up to (1024,1024,64), 1024 threads)",
                 b.x, b.y, b.z);
        return cudaErrorInvalidConfiguration;
    }
    if (!g.x || !g.y || !g.z || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535) {
        snprintf(why, n, "grid (%u,%u,%u) is not within sm_90's limits ((2^31-1, 65535, 65535))",
                 g.x, g.y, g.z);
        return cudaErrorInvalidConfiguration;
    }
    int limit = max_dyn_smem(s.func);
    if (s.smem > kMaxSmemOptin || s.smem > (size_t)limit) {
        snprintf(why, n, "%zu bytes of dynamic shared memory, more than %s (%d)", s.smem,
                 s.smem > kMaxSmemOptin ? "an sm_90 block can have"
                                        : "its limit: see cudaFuncSetAttribute",
                 s.smem > kMaxSmemOptin ? (int)kMaxSmemOptin : limit);
        return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}

/* What a launch checks before it runs: the error (recorded), the sticky fault (not recorded) or
 * 0. */
static cudaError_t launch_checks(const LaunchSpec &s)
{
    if (cudaError_t e = sticky_error()) return e; /* cudaGetLastError reports the earlier fault */
    if (kernel_worker()) {
        record_error(cudaErrorLaunchFailure, true,
                     "kernel '%s' launched from a kernel (no dynamic parallelism)", s.name);
        return cudaErrorLaunchFailure;
    }
    char why[256];
    if (cudaError_t e = check_config(s, why, sizeof why)) {
        record_error(e, false, "kernel '%s': %s", s.name, why);
        return e;
    }
    return cudaSuccess;
}

cudaError_t run_launch(const LaunchSpec &s, BodyFn body, const void *closure)
{
    if (cudaError_t e = launch_checks(s)) return e;
    if (nth_call_fails("GPT_EMU_LOSE_DEVICE", 2)) {
        lose_device("device lost at kernel '%s' (injected by GPT_EMU_LOSE_DEVICE)", s.name);
        return cudaErrorDevicesUnavailable;
    }
    if (int sm = emu_compute_capability(); sm < 80) { /* as a GPU the library has no code for */
        record_error(cudaErrorNoKernelImageForDevice, false,
                     "kernel '%s': no code for compute capability "
                     "%d.%d (GPT_EMU_SM; kernels/cuda needs 8.0)",
                     s.name, sm / 10, sm % 10);
        return cudaErrorNoKernelImageForDevice;
    }
    if (nth_call_fails("GPT_EMU_FAIL_LAUNCH", 1)) {
        record_error(cudaErrorLaunchFailure, true,
                     "kernel '%s': launch failure injected by GPT_EMU_FAIL_LAUNCH", s.name);
        return cudaErrorLaunchFailure;
    }
    static std::atomic<uint64_t> launches{0};
    Order order = schedule_order();
    if (order == ORDER_INVALID) {
        record_error(cudaErrorInvalidValue, false,
                     "kernel '%s': GPT_EMU_ORDER='%s': expected forward, reverse or shuffle",
                     s.name, getenv("GPT_EMU_ORDER"));
        return cudaErrorInvalidValue;
    }
    install_handler();
    Grid g;
    g.order = order;
    g.seq = launches.fetch_add(1);
    g.spec = &s;
    g.body = body;
    g.closure = closure;
    g.nblocks = (uint64_t)s.grid.x * s.grid.y * s.grid.z;
    g.nthreads = (int)(s.block.x * s.block.y * s.block.z);
    bool parallel = pool_threads() > 1 && g.nblocks > 1 && g.nblocks * g.nthreads >= 2048;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!parallel || !run_on_pool(&g)) run_blocks(this_worker(), &g);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    char shape[96];
    snprintf(shape, sizeof shape, "grid=%u,%u,%u block=%u,%u,%u", s.grid.x, s.grid.y, s.grid.z,
             s.block.x, s.block.y, s.block.z);
    log_launch(s.name, shape, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
    if (!g.failed) return cudaSuccess;
    record_error(cudaErrorLaunchFailure, true, "%s", g.err.c_str());
    return cudaErrorLaunchFailure;
}

void launch(const LaunchSpec &s, BodyFn body, const void *closure, KeepFn keep)
{
    bool captured = false;
    if (sticky_error() || capture_route(s.stream, s.name, &captured)) return;
    if (!captured) {
        run_launch(s, body, closure);
        return;
    }
    if (launch_checks(s)) { /* a configuration error shows at capture, as on a GPU */
        capture_invalidate(s.stream);
        return;
    }
    std::shared_ptr<const void> args = keep(closure);
    LaunchSpec spec = s;
    capture_add(s.stream, [spec, body, args](cudaStream_t stream) {
        LaunchSpec at = spec;
        at.stream = stream;
        return run_launch(at, body, args.get());
    });
}

} // namespace gk_emu
