/* emu_sched.cpp: runs one block: its threads as coroutines on one host thread.
 * Owns: the coroutine stacks (pooled per host thread, set up once with makecontext, then switched
 * with _setjmp/_longjmp: no system call per switch), the block scheduler, __syncthreads, the
 * warp collective rendezvous, and the deadlock report. Threads start in order of linear id; one
 * that ends hands its stack straight to the next (a block without barriers runs without a single
 * switch); one that waits yields to the scheduler, which resumes released threads, then starts
 * new ones. When nothing can run and threads still wait, the block fails naming who is missing. */
#undef _FORTIFY_SOURCE /* longjmp_chk refuses jumps between stacks */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "kernels/emu/emu_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define GK_EMU_ASAN 1
#endif

__thread uint3 threadIdx;
__thread uint3 blockIdx;
__thread uint3 blockDim;
__thread uint3 gridDim;

namespace gk_emu {

static thread_local Worker *tls_worker;

/* The host thread's own stack (AddressSanitizer must be told of every switch between stacks). */
static thread_local const void *host_stack_bottom;
static thread_local size_t host_stack_size;
#if GK_EMU_ASAN
#define SWITCH_TO(save, to, bottom, size)                                           \
    do {                                                                            \
        void *volatile fake_ = nullptr;                                             \
        if (!_setjmp(save)) {                                                       \
            __sanitizer_start_switch_fiber((void **)&fake_, (bottom), (size));      \
            _longjmp((to), 1);                                                      \
        }                                                                           \
        __sanitizer_finish_switch_fiber(fake_, nullptr, nullptr);                   \
    } while (0)
#else
#define SWITCH_TO(save, to, bottom, size)      \
    do {                                       \
        (void)(bottom), (void)(size);          \
        if (!_setjmp(save)) _longjmp((to), 1); \
    } while (0)
#endif

static size_t stack_bytes()
{
#if GK_EMU_ASAN
    static const int kb = env_int("GK_EMU_STACK_KB", 512, 16, 1 << 20);
#else
    static const int kb = env_int("GK_EMU_STACK_KB", 128, 16, 1 << 20);
#endif
    return (size_t)kb * 1024;
}

Worker *this_worker()
{
    if (!tls_worker) {
        tls_worker = new Worker;
        tls_worker->owner = pthread_self();
        pthread_attr_t attr;
        void *addr = nullptr;
        size_t size = 0;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            pthread_attr_getstack(&attr, &addr, &size);
            pthread_attr_destroy(&attr);
        }
        host_stack_bottom = addr;
        host_stack_size = size;
    }
    return tls_worker;
}

Worker *kernel_worker()
{
    Worker *w = tls_worker;
    return w && w->running && w->cur ? w : nullptr;
}

int lane_id(const Worker *w) { return (int)(w->cur - w->threads.data()) & 31; }

std::string thread_name(const Worker *, const Thread *t)
{
    char buf[64];
    snprintf(buf, sizeof buf, "(%u,%u,%u)", t->idx.x, t->idx.y, t->idx.z);
    return buf;
}

static std::string vformat(const char *fmt, va_list ap)
{
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    return buf;
}

void fail_block(Worker *w, const Thread *t, const std::string &what)
{
    if (w->failed) return;
    char head[512];
    snprintf(head, sizeof head, "kernel '%s' block (%u,%u,%u) thread %s: ", w->grid->spec->name, blockIdx.x,
             blockIdx.y, blockIdx.z, t ? thread_name(w, t).c_str() : "?");
    w->failed = true;
    w->msg = head + what;
}

/* ---- stacks ---- */

[[noreturn]] static void fiber_loop(Worker *w, Fiber *f);
static bool settle_activemask(Worker *w, int base);
static int warp_base(const Worker *w, const Thread *t);

static void fiber_entry()
{
    Worker *w = tls_worker;
    Fiber *f = w->booting;
#if GK_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
    SWITCH_TO(f->ctx, w->boot, host_stack_bottom, host_stack_size);
    fiber_loop(w, f);
}

/* (Re)starts f's coroutine at fiber_entry, which parks at once, ready to run a thread. */
static void boot_fiber(Worker *w, Fiber *f)
{
    ucontext_t uc;
    getcontext(&uc);
    uc.uc_stack.ss_sp = f->map + f->guard;
    uc.uc_stack.ss_size = f->size;
    uc.uc_link = nullptr;
    makecontext(&uc, fiber_entry, 0);
    w->booting = f;
    f->thread = nullptr;
    void *volatile fake = nullptr;
    if (!_setjmp(w->boot)) {
#if GK_EMU_ASAN
        __sanitizer_start_switch_fiber((void **)&fake, f->map + f->guard, f->size);
#endif
        setcontext(&uc);
    }
#if GK_EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
    (void)fake;
}

static Fiber *get_fiber(Worker *w)
{
    if (!w->idle.empty()) {
        Fiber *f = w->idle.back();
        w->idle.pop_back();
        return f;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE), size = stack_bytes();
    size_t guard = page > 65536 ? page : 65536; /* a large frame may skip a single page */
    void *map = mmap(nullptr, guard + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
    if (map == MAP_FAILED) return nullptr;
    if (mprotect(map, guard, PROT_NONE) != 0) {
        munmap(map, guard + size);
        return nullptr;
    }
    Fiber *f = new Fiber{};
    f->map = (char *)map;
    f->guard = guard;
    f->size = size;
    w->fibers.push_back(f);
    boot_fiber(w, f);
    return f;
}

void recycle_fibers(Worker *w)
{
    for (Fiber *f : w->fibers)
        if (f->thread) {
            boot_fiber(w, f);
            w->idle.push_back(f);
        }
}

/* ---- switching ---- */

static void start_thread(Worker *w, Fiber *f)
{
    int id = w->next_start++;
    Thread *t = &w->threads[id];
    const dim3 &b = w->grid->spec->block;
    t->idx = uint3{id % b.x, (id / b.x) % b.y, id / (b.x * b.y)};
    t->fiber = f;
    t->state = T_RUN;
    f->thread = t;
    w->cur = t;
    threadIdx = t->idx;
}

/* From the scheduler into f, until f yields back. */
static void resume(Worker *w, Fiber *f)
{
    SWITCH_TO(w->sched, f->ctx, f->map + f->guard, f->size);
}

/* From the running thread back to the scheduler; returns when the scheduler resumes it. */
static void yield_to_scheduler(Worker *w, Fiber *f)
{
    SWITCH_TO(f->ctx, w->sched, host_stack_bottom, host_stack_size);
}

static void fiber_loop(Worker *w, Fiber *f)
{
    for (;;) {
        Thread *t = f->thread;
        w->grid->body(w->grid->closure);
        t->state = T_DONE;
        t->fiber = nullptr;
        w->ndone++;
        settle_activemask(w, warp_base(w, t));
        if (w->next_start < w->n) {
            start_thread(w, f); /* the next thread runs on this stack: no switch */
            continue;
        }
        f->thread = nullptr;
        w->idle.push_back(f);
        yield_to_scheduler(w, f);
    }
}

static void make_ready(Worker *w, int id)
{
    w->threads[id].state = T_READY;
    int at = w->ready_head + w->ready_count++;
    w->ready[at >= w->n ? at - w->n : at] = id;
}

/* Completes the warp's __activemask once none of its lanes runs or is about to: returns whether
 * it did. The lanes there get the mask of who is there. */
static bool settle_activemask(Worker *w, int base)
{
    Warp &wp = w->warps[base / 32];
    if (!wp.at_activemask) return false;
    for (int l = 0; l < 32 && base + l < w->n; l++) {
        ThreadState s = w->threads[base + l].state;
        if (s == T_NEW || s == T_RUN || s == T_READY) return false;
    }
    unsigned m = wp.at_activemask;
    wp.at_activemask = 0;
    for (int l = 0; l < 32; l++)
        if (m >> l & 1) {
            wp.slot[l]->result = m;
            if (&w->threads[base + l] != w->cur) make_ready(w, base + l);
        }
    return true;
}

static int warp_base(const Worker *w, const Thread *t) { return (int)(t - w->threads.data()) & ~31; }

static void wait_here(Worker *w, ThreadState why)
{
    Thread *t = w->cur;
    t->state = why;
    settle_activemask(w, warp_base(w, t));
    yield_to_scheduler(w, t->fiber);
}

/* ---- the block ---- */

static void setup_block(Worker *w, uint64_t b)
{
    const LaunchSpec &s = *w->grid->spec;
    blockIdx = uint3{(unsigned)(b % s.grid.x), (unsigned)(b / s.grid.x % s.grid.y),
                     (unsigned)(b / ((uint64_t)s.grid.x * s.grid.y))};
    int n = w->grid->nthreads;
    w->n = n;
    if ((int)w->threads.size() < n) {
        w->threads.resize(n);
        w->ready.resize(n);
        w->warps.resize((n + 31) / 32);
    }
    for (int i = 0; i < n; i++) w->threads[i].state = T_NEW;
    for (int i = 0; i < (n + 31) / 32; i++) w->warps[i].arrived = w->warps[i].at_activemask = 0;
    w->ready_head = w->ready_count = 0;
    w->next_start = w->ndone = w->at_barrier = 0;
    w->failed = false;
    w->cur = nullptr;
}

static const char *what_it_does(const Thread *t, std::string &buf)
{
    switch (t->state) {
    case T_DONE: return "exited";
    case T_BARRIER: return "waits at __syncthreads";
    case T_WARP: {
        char s[96];
        snprintf(s, sizeof s, "waits at %s (mask 0x%08x)", collective_name(t->slot->kind), t->slot->mask);
        return (buf = s).c_str();
    }
    default: return "never got there";
    }
}

static void report_deadlock(Worker *w)
{
    Thread *th = w->threads.data(), *t = nullptr, *missing = nullptr;
    for (int i = 0; i < w->n && !t; i++)
        if (th[i].state == T_BARRIER || th[i].state == T_WARP) t = &th[i];
    if (!t) return;
    std::string buf, what;
    char msg[512];
    if (t->state == T_BARRIER) {
        for (int i = 0; i < w->n && !missing; i++)
            if (th[i].state != T_BARRIER) missing = &th[i];
        snprintf(msg, sizeof msg, "__syncthreads is not reached by thread %s, which %s",
                 thread_name(w, missing).c_str(), what_it_does(missing, buf));
    } else {
        int base = (int)(t - th) & ~31;
        const Warp &wp = w->warps[base / 32];
        int lane = 0;
        while (lane < 31 && (!(t->slot->mask >> lane & 1) || (wp.arrived >> lane & 1))) lane++;
        missing = &th[base + lane];
        snprintf(msg, sizeof msg, "%s (mask 0x%08x) never completes: lane %d, thread %s, %s",
                 collective_name(t->slot->kind), t->slot->mask, lane, thread_name(w, missing).c_str(),
                 what_it_does(missing, buf));
    }
    fail_block(w, t, msg);
}

void run_block(Worker *w, uint64_t b)
{
    setup_block(w, b);
    while (!w->failed) {
        if (w->ready_count) {
            Thread *t = &w->threads[w->ready[w->ready_head]];
            w->ready_head = w->ready_head + 1 == w->n ? 0 : w->ready_head + 1;
            w->ready_count--;
            t->state = T_RUN;
            w->cur = t;
            threadIdx = t->idx;
            resume(w, t->fiber);
        } else if (w->next_start < w->n) {
            Fiber *f = get_fiber(w);
            if (!f) {
                fail_block(w, &w->threads[w->next_start], "no memory for another thread stack");
                break;
            }
            start_thread(w, f);
            resume(w, f);
        } else {
            break;
        }
    }
    if (!w->failed && w->ndone < w->n) report_deadlock(w);
    w->cur = nullptr;
}

void fail_thread(Worker *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_block(w, w->cur, vformat(fmt, ap));
    va_end(ap);
    yield_to_scheduler(w, w->cur->fiber); /* never resumed: the block is over */
    __builtin_unreachable();
}

void *dyn_smem()
{
    Worker *w = kernel_worker();
    return w ? w->smem : nullptr;
}

uint64_t warp_collective(WarpSlot *s)
{
    Worker *w = kernel_worker();
    if (!w) return s->value;
    Thread *t = w->cur;
    int id = (int)(t - w->threads.data()), lane = id & 31, base = id & ~31;
    int lanes = w->n - base < 32 ? w->n - base : 32;
    unsigned exists = lanes == 32 ? ~0u : (1u << lanes) - 1;
    if (!(s->mask >> lane & 1))
        fail_thread(w, "%s with mask 0x%08x, which leaves out the calling lane %d", collective_name(s->kind),
                    s->mask, lane);
    if (s->mask & ~exists)
        fail_thread(w, "%s with mask 0x%08x names lanes past the end of the block (this warp has %d)",
                    collective_name(s->kind), s->mask, lanes);
    Warp &wp = w->warps[base / 32];
    wp.slot[lane] = s;
    wp.arrived |= 1u << lane;
    t->slot = s;
    if ((wp.arrived & s->mask) != s->mask) {
        wait_here(w, T_WARP);
        return s->result;
    }
    for (int l = 0; l < 32; l++)
        if ((s->mask >> l & 1) && (wp.slot[l]->kind != s->kind || wp.slot[l]->mask != s->mask))
            fail_thread(w, "warp collectives do not match: lane %d at %s (mask 0x%08x), lane %d at %s (mask 0x%08x)",
                        l, collective_name(wp.slot[l]->kind), wp.slot[l]->mask, lane, collective_name(s->kind),
                        s->mask);
    complete_collective(wp.slot, s->mask);
    wp.arrived &= ~s->mask;
    for (int l = 0; l < 32; l++)
        if ((s->mask >> l & 1) && l != lane) make_ready(w, base + l);
    return s->result;
}

} // namespace gk_emu

using namespace gk_emu;

void __syncthreads()
{
    Worker *w = kernel_worker();
    if (!w) return;
    if (++w->at_barrier == w->n) {
        w->at_barrier = 0;
        for (int i = 0; i < w->n; i++)
            if (w->threads[i].state == T_BARRIER) make_ready(w, i);
        return;
    }
    wait_here(w, T_BARRIER);
}

unsigned __activemask()
{
    Worker *w = kernel_worker();
    if (!w) return 1;
    Thread *t = w->cur;
    int base = warp_base(w, t), lane = (int)(t - w->threads.data()) & 31;
    WarpSlot s{WOP_ACTIVEMASK, 0, 0, 0, 32, {}, 0};
    Warp &wp = w->warps[base / 32];
    wp.slot[lane] = t->slot = &s;
    wp.at_activemask |= 1u << lane;
    t->state = T_WARP;
    if (settle_activemask(w, base)) {
        t->state = T_RUN;
        return (unsigned)s.result;
    }
    yield_to_scheduler(w, t->fiber);
    return (unsigned)s.result;
}
