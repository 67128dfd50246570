/* emu_fiber.cpp: the stacks a block's threads run on (coroutines) and the switches between them.
 * Owns: stack allocation (a 64 KiB guard below each, pooled per host thread, in slots of the stack
 * arena that tell whose they are, else mapped alone), starting a stack at fiber_main
 * (emu_sched.cpp), and the switches. On x86-64 a switch saves the six
 * callee-saved registers and swaps stack pointers (a few instructions); elsewhere, or with
 * GK_EMU_PORTABLE_SWITCH, makecontext sets a stack up once and _setjmp/_longjmp switch. Never a
 * system call per switch. AddressSanitizer is told of every switch between stacks. */
#undef _FORTIFY_SOURCE /* longjmp_chk refuses jumps between stacks */
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "kernels/emu/emu_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define ASAN_START(fake, bottom, size) \
    __sanitizer_start_switch_fiber((void **)(fake), (bottom), (size))
#define ASAN_FINISH(fake) __sanitizer_finish_switch_fiber((fake), nullptr, nullptr)
#else
#define ASAN_START(fake, bottom, size) ((void)(fake), (void)(bottom), (void)(size))
#define ASAN_FINISH(fake) ((void)(fake))
#endif

#if GK_EMU_ASM_SWITCH
/* gk_emu_ctx_switch(&from_sp, to_sp): pushes rbp rbx r12-r15, saves rsp, loads to_sp, pops,
 * returns. */
extern "C" void gk_emu_ctx_switch(void **save_sp, void *to_sp)
    __attribute__((visibility("hidden")));
asm(".text\n"
    ".globl gk_emu_ctx_switch\n"
    ".hidden gk_emu_ctx_switch\n"
    ".type gk_emu_ctx_switch,@function\n"
    "gk_emu_ctx_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size gk_emu_ctx_switch, .-gk_emu_ctx_switch\n");
#define CTX_SWITCH(from, to) gk_emu_ctx_switch(&(from).sp, (to).sp)
#else
#define CTX_SWITCH(from, to)                              \
    do {                                                  \
        if (!_setjmp((from).jb)) _longjmp((to).jb, 1);    \
    } while (0)
#endif

/* From context `from` to `to`, whose stack is [bottom, bottom + size); returns when resumed. */
#define SWITCH(from, to, bottom, size)          \
    do {                                        \
        void *volatile fake_ = nullptr;         \
        ASAN_START(&fake_, (bottom), (size));   \
        CTX_SWITCH(from, to);                   \
        ASAN_FINISH(fake_);                     \
    } while (0)

namespace gk_emu {

static size_t stack_bytes()
{
#if defined(__SANITIZE_ADDRESS__)
    static const int kb = env_int("GK_EMU_STACK_KB", 512, 16, 1 << 20);
#else
    static const int kb = env_int("GK_EMU_STACK_KB", 128, 16, 1 << 20);
#endif
    return (size_t)kb * 1024;
}

static char *stack_bottom(const Fiber *f) { return f->map + f->guard; }

/* ---- the stack arena (emu_internal.h) ---- */

StackArena stack_arena;
enum : uintptr_t { kArenaBytes = (uintptr_t)1 << 31 }; /* address space, not memory */
static std::mutex arena_mu;
static std::vector<long> arena_free; /* slots given back */
static uintptr_t arena_used;         /* slots ever handed out */

/* Reserves the region, inaccessible, for slots of at least bytes each; false where it cannot. */
static bool arena_reserve(size_t bytes)
{
    static bool tried;
    if (tried) return stack_arena.nslots.load(std::memory_order_relaxed) != 0;
    tried = true;
    unsigned shift = 12;
    while (((uintptr_t)1 << shift) < bytes) shift++;
    uintptr_t n = kArenaBytes >> shift;
    if (n < 64) return false;
    void *map = mmap(nullptr, kArenaBytes, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED) return false;
    stack_arena.owner = new Worker *[n]();
    stack_arena.lo = reinterpret_cast<uintptr_t>(map);
    stack_arena.shift = shift;
    stack_arena.nslots.store(n, std::memory_order_release);
    return true;
}

/* A slot of the arena for w's new fiber of guard + size bytes, mapped and its guard left
 * inaccessible; -1 when the arena has none. */
static long arena_take(Worker *w, size_t guard, size_t size, char **map)
{
    std::lock_guard<std::mutex> lock(arena_mu);
    if (!arena_reserve(guard + size)) return -1;
    long slot;
    if (!arena_free.empty()) slot = arena_free.back(), arena_free.pop_back();
    else if (arena_used < stack_arena.nslots.load(std::memory_order_relaxed))
        slot = (long)arena_used++;
    else return -1;
    char *at = reinterpret_cast<char *>(stack_arena.lo + ((uintptr_t)slot << stack_arena.shift));
    if (mmap(at + guard, size, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED) {
        arena_free.push_back(slot);
        return -1;
    }
    stack_arena.owner[slot] = w;
    *map = at;
    return slot;
}

/* The slot back, its memory returned and the whole slot inaccessible again. */
static void arena_give(const Fiber *f)
{
    std::lock_guard<std::mutex> lock(arena_mu);
    mmap(f->map, f->guard + f->size, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    stack_arena.owner[f->slot] = nullptr;
    arena_free.push_back(f->slot);
}

/* Where every stack starts: the first switch to it lands here. */
static void fiber_entry()
{
    Worker *w = this_worker();
    ASAN_FINISH(nullptr);
#if GK_EMU_ASM_SWITCH
    Fiber *f = w->cur->fiber; /* the scheduler just handed it a thread */
#else
    Fiber *f = w->booting; /* parked at once: resumed when it gets a thread */
    SWITCH(f->ctx, w->boot, w->host_stack, w->host_stack_size);
#endif
    fiber_main(w, f);
}

void fiber_reset(Worker *w, Fiber *f)
{
    f->thread = nullptr;
#if GK_EMU_ASM_SWITCH
    (void)w;
    void **sp = (void **)((uintptr_t)(stack_bottom(f) + f->size) & ~(uintptr_t)15);
    *--sp = nullptr;                            /* fiber_entry's return address: it never returns */
    *--sp = reinterpret_cast<void *>(fiber_entry); /* where the switch's ret goes */
    for (int i = 0; i < 6; i++) *--sp = nullptr; /* rbp rbx r12-r15 */
    f->ctx.sp = sp;
#else
    ucontext_t uc;
    getcontext(&uc);
    uc.uc_stack.ss_sp = stack_bottom(f);
    uc.uc_stack.ss_size = f->size;
    uc.uc_link = nullptr;
    makecontext(&uc, fiber_entry, 0);
    w->booting = f;
    void *volatile fake = nullptr;
    if (!_setjmp(w->boot.jb)) {
        ASAN_START(&fake, stack_bottom(f), f->size);
        setcontext(&uc);
    }
    ASAN_FINISH(fake);
#endif
}

Fiber *fiber_get(Worker *w)
{
    if (!w->idle.empty()) {
        Fiber *f = w->idle.back();
        w->idle.pop_back();
        return f;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE), size = stack_bytes();
    size_t guard = page > 65536 ? page : 65536; /* a large frame may skip a single page */
    char *map = nullptr;
    long slot = arena_take(w, guard, size, &map);
    if (slot < 0) {
        void *alone = mmap(nullptr, guard + size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (alone == MAP_FAILED) return nullptr;
        if (mprotect(alone, guard, PROT_NONE) != 0) {
            munmap(alone, guard + size);
            return nullptr;
        }
        map = static_cast<char *>(alone);
    }
    Fiber *f = new Fiber{};
    f->slot = slot;
    f->map = map;
    f->guard = guard;
    f->size = size;
    w->fibers.push_back(f);
    fiber_reset(w, f);
    return f;
}

void fiber_free_all(Worker *w)
{
    for (Fiber *f : w->fibers) {
        if (f->slot >= 0) arena_give(f);
        else munmap(f->map, f->guard + f->size);
        delete f;
    }
    w->fibers.clear();
    w->idle.clear();
}

void switch_to_fiber(Worker *w, Fiber *f) { SWITCH(w->sched, f->ctx, stack_bottom(f), f->size); }

void switch_fiber(Worker *, Fiber *from, Fiber *to)
{
    SWITCH(from->ctx, to->ctx, stack_bottom(to), to->size);
}

void switch_to_scheduler(Worker *w, Fiber *f)
{
    SWITCH(f->ctx, w->sched, w->host_stack, w->host_stack_size);
}

} // namespace gk_emu
