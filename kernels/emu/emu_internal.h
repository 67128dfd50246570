/* emu_internal.h: what the emulator's .cpp files share (not for kernel code).
 * Owns: the per-host-thread Worker (coroutine stacks, the running block's threads and warps,
 * dynamic shared memory with its guard), the Grid a launch shares between host threads, and the
 * error and device-limit helpers. emu_sched.cpp runs blocks, emu_fiber.cpp owns the stacks and
 * switches, emu_launch.cpp runs grids, emu_warp.cpp computes warp collectives and wmma,
 * emu_runtime.cpp keeps the error state, emu_memory.cpp the device's memory, emu_graph.cpp
 * captures streams and replays graphs,
 * emu_race.cpp checks shared memory for races, emu_cublaslt.cpp maps cuBLASLt to CBLAS,
 * emu_nccl.cpp runs NCCL's collectives over sockets (it needs nothing here). */
#ifndef GK_EMU_INTERNAL_H
#define GK_EMU_INTERNAL_H

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/emu/emu.h"

struct gk_emu_stream {
    unsigned flags; /* cudaStreamNonBlocking or not */
};

namespace gk_emu {

/* sm_90 numbers the emulator enforces and reports. */
enum : size_t {
    kMaxThreadsPerBlock = 1024,
    kDefaultSmem = 48 * 1024,
    kMaxSmemOptin = 227 * 1024,
    kNumSMs = 132,
};

enum ThreadState : unsigned char { T_NEW, T_RUN, T_READY, T_BARRIER, T_WARP, T_DONE };

/* GPT_EMU_ORDER: the order threads start and are released in, and blocks run in. A GPU promises
 * none, so a kernel whose results change with it has a race (a missing barrier). */
enum Order : unsigned char { ORDER_FORWARD, ORDER_REVERSE, ORDER_SHUFFLE, ORDER_INVALID };

/* A suspended context: a stack pointer (x86-64, emu_fiber.cpp's switch) or a jmp_buf. */
#if defined(__x86_64__) && !defined(GK_EMU_PORTABLE_SWITCH)
#define GK_EMU_ASM_SWITCH 1
struct Ctx {
    void *sp;
};
#else
#define GK_EMU_ASM_SWITCH 0
struct Ctx {
    jmp_buf jb;
};
#endif

struct Thread;
struct Fiber {
    Ctx ctx;
    char *map;     /* guard pages, then the stack */
    size_t guard;  /* bytes of guard at map */
    size_t size;   /* bytes of stack after the guard */
    Thread *thread; /* NULL while idle */
    long slot;      /* its slot of the stack arena, or -1: mapped on its own */
};
struct Thread {
    uint3 idx;
    ThreadState state;
    Fiber *fiber;
    WarpSlot *slot; /* while T_WARP */
};
enum : uint32_t { kRaceRing = 64 }; /* completed collectives a warp remembers (emu_race.cpp) */
struct Warp {
    unsigned arrived;        /* lanes waiting at a collective with a mask */
    unsigned at_activemask;  /* lanes waiting at __activemask */
    WarpSlot *slot[32];
    /* the collective lanes last arrived at (kind, mask) and those of its lanes there (open_here);
     * open_here is 0 when it completed: lets a lane that joins it skip comparing every slot */
    int open_kind;
    unsigned open_mask, open_here;
    uint32_t seq;                /* collectives completed in this block
                                  * (the race checker's clock) */
    unsigned masks[kRaceRing];   /* the mask of collective seq at masks[seq % kRaceRing] */
};

/* What the race checker knows of one byte of shared memory in barrier interval epoch: the last
 * writer (at its warp's seq wseq), the readers since (rwarp: their warp, or several; rlanes and
 * rseq: their lanes and the latest seq; rfirst, rlast: two of them, to name). */
struct RaceCell {
    uint32_t epoch, wseq, rseq, rlanes;
    uint16_t writer, rwarp, rfirst, rlast;
};
struct RaceState {
    /* the bytes every load and store is first compared with (one cache line): this launch's
     * dynamic shared memory and this host thread's copy of the module's TLS (static
     * __shared__), both of length 0 while no launch with the checker on runs on this worker */
    alignas(32) uintptr_t dyn = 0, dyn_len = 0;
    uintptr_t tls = 0, tls_len = 0;
    uintptr_t tls_block = 0; /* where that copy is (found at the first launch checked here) */
    uint32_t epoch = 0; /* the barrier interval: one more at each block start and __syncthreads */
    std::vector<RaceCell> dyn_cells, tls_cells;
};

/* One launch, shared by the host threads that run its blocks. */
struct Grid {
    const LaunchSpec *spec;
    BodyFn body;
    const void *closure;
    uint64_t nblocks;
    int nthreads; /* per block */
    Order order;
    uint64_t seq; /* this launch's number, for ORDER_SHUFFLE's permutations */
    std::atomic<uint64_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex mu;
    uint64_t err_block = ~(uint64_t)0; /* the lowest failing block wins */
    std::string err;
};

/* One per host thread that runs blocks. */
struct Worker {
    Ctx sched; /* the block scheduler, on the host thread's own stack */
    Ctx boot;  /* portable switch only: where a new stack parks back to */
    const void *host_stack = nullptr; /* the host thread's stack, for AddressSanitizer */
    size_t host_stack_size = 0;
    sigjmp_buf fault; /* where the SIGSEGV handler returns to */
    std::vector<Fiber *> fibers, idle;
    Fiber *booting = nullptr;
    char *smem_map = nullptr; /* kMaxSmemOptin rounded to pages, then the guard */
    char *smem_guard = nullptr;
    char *smem = nullptr;     /* this launch's dynamic shared memory: ends at smem_guard */
    char *altstack = nullptr; /* the signal stack this worker set up, if it did */
    Grid *grid = nullptr;
    /* the running block */
    int n = 0;
    std::vector<Thread> threads;
    std::vector<Warp> warps;
    std::vector<int> ready; /* ring of thread ids to resume */
    std::vector<int> order; /* thread ids in start and release order (not ORDER_FORWARD) */
    int ready_head = 0, ready_count = 0;
    int next_start = 0, ndone = 0, at_barrier = 0, at_activemask = 0;
    bool failed = false;
    std::string msg;
    Thread *cur = nullptr;
    uint64_t block = 0; /* linear index of the running block */
    RaceState race;
    /* read by the signal handler */
    volatile sig_atomic_t running = 0;
    volatile sig_atomic_t fault_kind = 0; /* 1 shared memory, 2 stack */
    char *volatile fault_addr = nullptr;
    pthread_t owner;
};

enum : size_t { kSmemGuard = 64 * 1024 };

extern thread_local Worker *tls_worker; /* this host thread's, or NULL */

/* emu_fiber.cpp: the stack arena, one reserved region cut into slots of 2^shift bytes, each a
 * fiber's guard and stack, with the worker that owns it. Code running a kernel thread finds its
 * worker from its stack pointer: a thread-local variable of this library (loaded with dlopen)
 * costs a __tls_get_addr call, and the race checker's hooks run at every load and store. */
struct StackArena {
    uintptr_t lo;
    unsigned shift;
    std::atomic<uintptr_t> nslots; /* 0 until reserved (or where it could not be) */
    Worker **owner;
};
extern StackArena stack_arena;
/* The worker whose kernel thread runs on this stack, else this host thread's (or NULL). */
__attribute__((always_inline)) inline Worker *stack_worker()
{
    uintptr_t i = ((uintptr_t)__builtin_frame_address(0) - stack_arena.lo) >> stack_arena.shift;
    return i < stack_arena.nslots.load(std::memory_order_relaxed) ? stack_arena.owner[i]
                                                                  : tls_worker;
}
Worker *this_worker();                 /* creates it on first use */
void release_worker();                 /* frees this thread's worker (a pool thread that ends) */
Worker *kernel_worker();               /* this thread's worker while it runs
                                        * a kernel thread, else NULL */
void run_block(Worker *w, uint64_t b); /* w->failed and w->msg tell how it went */
void recycle_fibers(Worker *w);        /* after a failed block: every stack back to idle */

/* emu_fiber.cpp: stacks and switches. */
Fiber *fiber_get(Worker *w);              /* an idle stack, or a new one; NULL without memory */
void fiber_reset(Worker *w, Fiber *f);    /* its next switch starts fiber_main afresh */
void fiber_free_all(Worker *w);
void switch_to_fiber(Worker *w, Fiber *f);     /* returns when f switches back */
void switch_to_scheduler(Worker *w, Fiber *f); /* returns when the scheduler resumes f */
void switch_fiber(Worker *w, Fiber *from, Fiber *to); /* from != to; returns when from is resumed */
[[noreturn]] void fiber_main(Worker *w, Fiber *f); /* emu_sched.cpp: runs threads on f forever */
int lane_id(const Worker *w);
std::string thread_name(const Worker *w, const Thread *t); /* "(x,y,z)" */
/* Marks the block failed with "kernel 'k' block (x,y,z) thread (x,y,z): what" (first failure
 * wins). */
void fail_block(Worker *w, const Thread *t, const std::string &what);
/* fail_block for the running thread, then back to the scheduler for good. */
[[noreturn]] void fail_thread(Worker *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* emu_race.cpp: the shared-memory race checker (what the kernels' instrumented accesses call). */
void race_launch(Worker *w, const LaunchSpec &s); /* before w runs blocks of s (w->smem set) */
void race_launch_done(Worker *w);                  /* after: the window closed */
void race_interval(Worker *w);                    /* a block starts, or its
                                                   * __syncthreads releases */
void race_warp_synced(Warp &wp, unsigned mask);   /* a collective of these lanes completed */
/* An access of the running kernel thread that uninstrumented emulator code makes for it (wmma,
 * mma.h): checked as the kernel's own, when it is in the block's shared memory. */
void race_access(const void *p, size_t n, bool write);

/* emu_warp.cpp: fills every slot's result once all lanes of mask arrived (slots by lane). */
void complete_collective(WarpSlot *const slots[32], unsigned mask);
const char *collective_name(int kind);

/* emu_runtime.cpp: error state. A fault is sticky (until cudaDeviceReset); a config error is
 * not. */
void record_error(cudaError_t code, bool fault, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
cudaError_t sticky_error();
/* True when this is the Nth call since env's value was first seen (fault injection); which (0..2)
 * picks the counter: 0 cudaMalloc, 1 launches, 2 launches for GPT_EMU_LOSE_DEVICE. */
bool nth_call_fails(const char *env, int which);
/* The emulated device's compute capability as major*10+minor: GPT_EMU_SM (10..199), else 90. */
int emu_compute_capability(void);
/* GPT_EMU_LOSE_DEVICE: the device is gone; its error stays past cudaDeviceReset. */
void lose_device(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool device_lost();                                  /* lose_device was called */
cudaError_t fail(cudaError_t code, const char *call); /* records "call: code's name" */
/* emu_memory.cpp: the device's memory in bytes, GPT_EMU_MEM's where set, else the host's. */
size_t device_memory_total();
/* Whether GPT_EMU_MEM gives the device memory of its own (else it is the host's, unbounded). */
bool device_memory_own();
int env_int(const char *name, int fallback, int lo, int hi);
/* GPT_EMU_LAUNCH_LOG=FILE: appends "NAME SHAPE MICROSECONDS" for a kernel or cuBLASLt matmul
 * that ran (a graph's when it replays; not at capture). */
void log_launch(const char *name, const char *shape, double seconds);
int max_dyn_smem(const void *func); /* set by cudaFuncSetAttribute, else kDefaultSmem */
Order schedule_order(); /* GPT_EMU_ORDER: forward (default), reverse, shuffle; else ORDER_INVALID */

/* emu_launch.cpp: a launch as GK_LAUNCH runs it outside capture; returns the error it recorded
 * (or the sticky fault it met). cudaGraphLaunch runs a captured launch through it. */
cudaError_t run_launch(const LaunchSpec &spec, BodyFn body, const void *closure);

/* emu_graph.cpp: stream capture. A Node is one recorded call; it runs on the stream given. */
typedef std::function<cudaError_t(cudaStream_t)> Node;
/* Before work issued to stream s runs. cudaSuccess: run it now (*captured false), or s captures
 * (*captured true): check the call's arguments, then capture_add or capture_invalidate. An error
 * (recorded, call names the call): s's capture is invalidated, or s is stream 0 while a blocking
 * stream captures (that capture is invalidated): the call returns it and does nothing. */
cudaError_t capture_route(cudaStream_t s, const char *call, bool *captured);
void capture_add(cudaStream_t s, Node node);
void capture_invalidate(cudaStream_t s);
/* cudaMalloc, cudaFree, cudaMallocHost, cudaFreeHost, cudaMemcpy, cudaMemset: cudaSuccess, or
 * cudaErrorStreamCaptureUnsupported (recorded) when a capture's mode forbids them here (it is
 * invalidated). */
cudaError_t capture_forbids(const char *call);
/* cudaStreamSynchronize / cudaStreamQuery of s (device: cudaDeviceSynchronize, s unused):
 * cudaSuccess, or the error (recorded) when it would wait for a capture (invalidated). */
cudaError_t capture_sync(cudaStream_t s, bool device, const char *call);
void capture_forget(cudaStream_t s); /* cudaStreamDestroy: its capture, if any, is dropped */

} // namespace gk_emu

#endif
