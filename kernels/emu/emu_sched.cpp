/* emu_sched.cpp: runs one block: its threads as coroutines on one host thread.
 * Owns: the block scheduler, __syncthreads, the warp collective rendezvous, __activemask, and the
 * deadlock report (the stacks and switches are emu_fiber.cpp's). Threads start in order of
 * linear id (GPT_EMU_ORDER=reverse or shuffle: another order, to expose races); one that ends hands
 * its stack straight to the next (a block without barriers runs without a single switch); one
 * that waits yields to the scheduler, which resumes released threads, then starts new ones. When
 * nothing can run and threads still wait, the block fails naming who is missing. */
#include <stdarg.h>
#include <stdio.h>

#include "kernels/emu/emu_internal.h"

__thread uint3 threadIdx;
__thread uint3 blockIdx;
__thread uint3 blockDim;
__thread uint3 gridDim;

namespace gk_emu {

thread_local Worker *tls_worker;

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
        tls_worker->host_stack = addr;
        tls_worker->host_stack_size = size;
    }
    return tls_worker;
}

Worker *kernel_worker()
{
    Worker *w = stack_worker();
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
    snprintf(head, sizeof head, "kernel '%s' block (%u,%u,%u) thread %s: ", w->grid->spec->name,
             blockIdx.x, blockIdx.y, blockIdx.z, t ? thread_name(w, t).c_str() : "?");
    w->failed = true;
    w->msg = head + what;
}

static bool settle_activemask(Worker *w, int base);
static int warp_base(const Worker *w, const Thread *t);

void recycle_fibers(Worker *w)
{
    for (Fiber *f : w->fibers)
        if (f->thread) {
            fiber_reset(w, f);
            w->idle.push_back(f);
        }
}

/* ---- switching ---- */

/* The id of the thread that starts next, or that is released k-th at a barrier. */
static int nth_thread(const Worker *w, int k)
{
    return w->grid->order == ORDER_FORWARD ? k : w->order[k];
}

static void start_thread(Worker *w, Fiber *f)
{
    int id = nth_thread(w, w->next_start++);
    Thread *t = &w->threads[id];
    const dim3 &b = w->grid->spec->block;
    t->idx = uint3{id % b.x, (id / b.x) % b.y, id / (b.x * b.y)};
    t->fiber = f;
    t->state = T_RUN;
    f->thread = t;
    w->cur = t;
    threadIdx = t->idx;
}

static void make_ready(Worker *w, int id)
{
    w->threads[id].state = T_READY;
    int at = w->ready_head + w->ready_count++;
    w->ready[at >= w->n ? at - w->n : at] = id;
}

/* The oldest released thread, now the running one. */
static Thread *take_ready(Worker *w)
{
    Thread *t = &w->threads[w->ready[w->ready_head]];
    w->ready_head = w->ready_head + 1 == w->n ? 0 : w->ready_head + 1;
    w->ready_count--;
    t->state = T_RUN;
    w->cur = t;
    threadIdx = t->idx;
    return t;
}

/* Leaves `from` (its thread waits or it went idle) for a released thread, else a new thread on
 * another stack, else the scheduler: one switch, not two. Returns when `from` is resumed. */
static void run_next(Worker *w, Fiber *from)
{
    if (w->ready_count) {
        switch_fiber(w, from, take_ready(w)->fiber);
        return;
    }
    if (w->next_start < w->n) { /* from is not idle here, so fiber_get cannot return it */
        if (Fiber *f = fiber_get(w)) {
            start_thread(w, f);
            switch_fiber(w, from, f);
            return;
        }
    }
    switch_to_scheduler(w, from);
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
    w->at_activemask -= __builtin_popcount(m);
    for (int l = 0; l < 32; l++)
        if (m >> l & 1) {
            wp.slot[l]->result = m;
            if (&w->threads[base + l] != w->cur) make_ready(w, base + l);
        }
    return true;
}

static int warp_base(const Worker *w, const Thread *t)
{
    return (int)(t - w->threads.data()) & ~31;
}

void fiber_main(Worker *w, Fiber *f)
{
    for (;;) {
        Thread *t = f->thread;
        w->grid->body(w->grid->closure);
        t->state = T_DONE;
        t->fiber = nullptr;
        w->ndone++;
        if (w->at_activemask) settle_activemask(w, warp_base(w, t));
        if (w->next_start < w->n) {
            start_thread(w, f); /* the next thread runs on this stack: no switch */
            continue;
        }
        f->thread = nullptr;
        w->idle.push_back(f);
        run_next(w, f);
    }
}

static void wait_here(Worker *w, ThreadState why)
{
    Thread *t = w->cur;
    t->state = why;
    if (w->at_activemask) settle_activemask(w, warp_base(w, t));
    run_next(w, t->fiber);
}

/* ---- the block ---- */

/* w->order for block b: descending ids, or a permutation drawn from (launch, block). */
static void make_order(Worker *w, uint64_t b)
{
    int n = w->n;
    w->order.resize(n);
    for (int i = 0; i < n; i++) w->order[i] = n - 1 - i;
    if (w->grid->order != ORDER_SHUFFLE) return;
    uint64_t x = (w->grid->seq * 0x9E3779B97F4A7C15ull ^ b) | 1;
    for (int i = n - 1; i > 0; i--) { /* Fisher-Yates on xorshift64 */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int j = (int)(x % (uint64_t)(i + 1)), t = w->order[i];
        w->order[i] = w->order[j], w->order[j] = t;
    }
}

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
    if (w->grid->order != ORDER_FORWARD) make_order(w, b);
    for (int i = 0; i < (n + 31) / 32; i++)
        w->warps[i].arrived = w->warps[i].at_activemask = w->warps[i].seq = w->warps[i].open_here =
            0;
    race_interval(w);
    w->ready_head = w->ready_count = 0;
    w->next_start = w->ndone = w->at_barrier = w->at_activemask = 0;
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
        snprintf(s, sizeof s, "waits at %s (mask 0x%08x)", collective_name(t->slot->kind),
                 t->slot->mask);
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
        int lane = 0; /* the first lane of the mask that is not at this same collective */
        while (lane < 31 && (!(t->slot->mask >> lane & 1) ||
                             ((wp.arrived >> lane & 1) && wp.slot[lane]->kind == t->slot->kind &&
                              wp.slot[lane]->mask == t->slot->mask)))
            lane++;
        missing = &th[base + lane];
        snprintf(msg, sizeof msg, "%s (mask 0x%08x) never completes: lane %d, thread %s, %s",
                 collective_name(t->slot->kind), t->slot->mask, lane,
                 thread_name(w, missing).c_str(), what_it_does(missing, buf));
    }
    fail_block(w, t, msg);
}

void run_block(Worker *w, uint64_t b)
{
    setup_block(w, b);
    while (!w->failed) {
        if (w->ready_count) {
            switch_to_fiber(w, take_ready(w)->fiber);
        } else if (w->next_start < w->n) {
            Fiber *f = fiber_get(w);
            if (!f) {
                fail_block(w, &w->threads[nth_thread(w, w->next_start)],
                           "no memory for another thread stack");
                break;
            }
            start_thread(w, f);
            switch_to_fiber(w, f);
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
    switch_to_scheduler(w, w->cur->fiber); /* never resumed: the block is over */
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
        fail_thread(w, "%s with mask 0x%08x, which leaves out the calling lane %d",
                    collective_name(s->kind), s->mask, lane);
    if (s->mask & ~exists)
        fail_thread(w,
                    "%s with mask 0x%08x names lanes past the end of the block (this warp has %d)",
                    collective_name(s->kind), s->mask, lanes);
    Warp &wp = w->warps[base / 32];
    /* A lane this one waits for that waits elsewhere, for this one too: a deadlock. One that waits
     * only for others may still go on once they arrive (as in some other thread order), so the
     * collective completes once every lane of its mask is at it. */
    unsigned here = 1u << lane, waiting = wp.arrived & s->mask;
    if (wp.open_here && wp.open_kind == s->kind && wp.open_mask == s->mask &&
        !(waiting & ~wp.open_here)) {
        here |= waiting; /* every lane of the mask that waits is at this same collective */
    } else {
        for (unsigned m = waiting; m; m &= m - 1) {
            int l = __builtin_ctz(m);
            const WarpSlot *o = wp.slot[l];
            if (o->kind == s->kind && o->mask == s->mask) {
                here |= 1u << l;
                continue;
            }
            if (o->mask >> lane & 1)
                fail_thread(w,
                            "warp collectives do not match: lane %d at %s "
                            "(mask 0x%08x), lane %d at %s (mask 0x%08x)",
                            l, collective_name(o->kind), o->mask, lane, collective_name(s->kind),
                            s->mask);
        }
    }
    wp.open_kind = s->kind, wp.open_mask = s->mask, wp.open_here = here;
    wp.slot[lane] = s;
    wp.arrived |= 1u << lane;
    t->slot = s;
    if (here != s->mask) {
        wait_here(w, T_WARP);
        return s->result;
    }
    complete_collective(wp.slot, s->mask);
    wp.arrived &= ~s->mask;
    wp.open_here = 0;
    race_warp_synced(wp, s->mask);
    bool down = w->grid->order != ORDER_FORWARD;
    for (int k = 0; k < 32; k++) {
        int l = down ? 31 - k : k;
        if ((s->mask >> l & 1) && l != lane) make_ready(w, base + l);
    }
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
        race_interval(w);
        for (int k = 0; k < w->n; k++) {
            int i = nth_thread(w, k);
            if (w->threads[i].state == T_BARRIER) make_ready(w, i);
        }
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
    w->at_activemask++;
    t->state = T_WARP;
    if (settle_activemask(w, base)) {
        t->state = T_RUN;
        return (unsigned)s.result;
    }
    run_next(w, t->fiber);
    return (unsigned)s.result;
}
