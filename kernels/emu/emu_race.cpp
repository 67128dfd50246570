/* emu_race.cpp: the shared-memory race checker, in the spirit of compute-sanitizer's racecheck.
 * Owns: the per-byte record of who read and wrote each byte of a block's shared memory (dynamic,
 * and static __shared__: the thread-local block of the module the kernels are in) in the current
 * barrier interval, the race report, and the ThreadSanitizer entry points GCC's -fsanitize=thread
 * instrumentation calls (the Makefile compiles the .cu sources with it and links no libtsan: the
 * emulator is the runtime). Accesses in one interval (between two __syncthreads of the block)
 * race when two threads touch a byte and one writes, unless both are lanes of one warp and a warp
 * collective of both lanes (__syncwarp, a shuffle, a vote, wmma) came between. The first race
 * ends the launch with an error naming kernel, threads and offset (fail_thread). Per host
 * thread (each Worker its own record); GPT_EMU_RACECHECK=0 turns it off. */
#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/emu/emu_internal.h"

namespace gk_emu {

enum : uint16_t { kNobody = 0xffff, kSeveralWarps = 0xfffe };

/* ---- where static __shared__ lives: the module's TLS block ---- */

static std::string module_path; /* the module's file, for naming a static __shared__ variable */
static size_t module_tls_size;

static int find_module(struct dl_phdr_info *info, size_t, void *arg)
{
    uintptr_t code = reinterpret_cast<uintptr_t>(&find_module);
    bool mine = false;
    size_t tls = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_LOAD && code - (info->dlpi_addr + ph.p_vaddr) < ph.p_memsz) mine = true;
        if (ph.p_type == PT_TLS) tls = ph.p_memsz;
    }
    if (!mine) return 0;
    *static_cast<void **>(arg) = info->dlpi_tls_data;
    static std::once_flag once;
    std::call_once(once, [&] {
        module_path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "/proc/self/exe";
        module_tls_size = tls;
    });
    return 1;
}

/* "'name' at offset k" for the static __shared__ variable at offset off of the TLS block, from
 * the module's symbol table; empty when it has none. Only on the error path. */
static std::string tls_symbol(size_t off)
{
    std::string name;
    int fd = open(module_path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) return name;
    void *map = fstat(fd, &st) == 0
                    ? mmap(nullptr, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)
                    : MAP_FAILED;
    close(fd);
    if (map == MAP_FAILED) return name;
    const char *base = static_cast<const char *>(map);
    const ElfW(Ehdr) *eh = reinterpret_cast<const ElfW(Ehdr) *>(base);
    size_t size = (size_t)st.st_size;
    if (size >= sizeof *eh && !memcmp(eh->e_ident, ELFMAG, SELFMAG) && eh->e_shoff &&
        eh->e_shoff + (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) <= size) {
        const ElfW(Shdr) *sh = reinterpret_cast<const ElfW(Shdr) *>(base + eh->e_shoff);
        for (int i = 0; i < eh->e_shnum && name.empty(); i++) {
            if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
            const ElfW(Shdr) &str = sh[sh[i].sh_link];
            if (sh[i].sh_offset + sh[i].sh_size > size || str.sh_offset + str.sh_size > size)
                continue;
            const ElfW(Sym) *sym = reinterpret_cast<const ElfW(Sym) *>(base + sh[i].sh_offset);
            for (size_t k = 0; k < sh[i].sh_size / sizeof *sym; k++) {
                const ElfW(Sym) &s = sym[k];
                if (ELF64_ST_TYPE(s.st_info) != STT_TLS || off < s.st_value ||
                    off >= s.st_value + s.st_size || s.st_name >= str.sh_size)
                    continue;
                const char *mangled = base + str.sh_offset + s.st_name;
                int status = 1;
                char *pretty = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
                char at[64];
                snprintf(at, sizeof at, "' at offset %zu", off - (size_t)s.st_value);
                name = std::string("'") + (status == 0 ? pretty : mangled) + at;
                free(pretty);
                break;
            }
        }
    }
    munmap(map, size);
    return name;
}

/* ---- the record ---- */

/* GPT_EMU_RACECHECK, read at each launch: 0 turns the checker off. */
static bool racecheck_on()
{
    const char *v = getenv("GPT_EMU_RACECHECK");
    return !v || strcmp(v, "0") != 0;
}

/* Whether any launch has had the checker on: until one has, the hooks return at once. */
static std::atomic<bool> race_any;

void race_launch(Worker *w, const LaunchSpec &s)
{
    RaceState &r = w->race;
    if (!racecheck_on()) return;
    race_any.store(true, std::memory_order_relaxed);
    if (!r.tls_block) { /* blockDim, set by now, is in the block: it is allocated for this thread */
        void *tls = nullptr;
        dl_iterate_phdr(find_module, &tls);
        r.tls_block = reinterpret_cast<uintptr_t>(tls);
        r.tls_cells.resize(tls ? module_tls_size : 0);
    }
    r.tls = r.tls_block;
    r.tls_len = r.tls_cells.size();
    r.dyn = s.smem ? reinterpret_cast<uintptr_t>(w->smem) : 0; /* (an empty window at 0) */
    r.dyn_len = s.smem;
    if (r.dyn_cells.size() < r.dyn_len) r.dyn_cells.resize(r.dyn_len);
}

void race_launch_done(Worker *w)
{
    RaceState &r = w->race;
    r.dyn = r.dyn_len = r.tls = r.tls_len = 0;
}

void race_interval(Worker *w)
{
    RaceState &r = w->race;
    if (++r.epoch == 0) { /* wrapped: no cell may look current */
        for (RaceCell &c : r.dyn_cells) c.epoch = 0;
        for (RaceCell &c : r.tls_cells) c.epoch = 0;
        r.epoch = 1;
    }
}

void race_warp_synced(Warp &wp, unsigned mask)
{
    wp.seq++;
    wp.masks[wp.seq % kRaceRing] = mask;
}

/* Whether a collective of the warp after the since-th had every lane of lanes in its mask. One
 * older than the ring remembers is taken to have been there (no false reports). */
static bool synced(const Warp &wp, uint32_t since, unsigned lanes)
{
    for (uint32_t s = wp.seq; s != since; s--) {
        if (wp.seq - s >= kRaceRing) return true;
        if ((wp.masks[s % kRaceRing] & lanes) == lanes) return true;
    }
    return false;
}

[[noreturn]] static void report(Worker *w, bool dyn, size_t off, bool write, int other,
                                bool other_wrote, bool same_warp)
{
    std::string where, who;
    char buf[160];
    if (dyn) {
        snprintf(buf, sizeof buf, "dynamic shared memory at offset %zu", off);
        where = buf;
    } else {
        std::string sym = tls_symbol(off);
        snprintf(buf, sizeof buf,
                 "static __shared__ memory at offset %zu of the module's thread-local block", off);
        where = sym.empty() ? buf : "static __shared__ " + sym;
    }
    if (other >= 0) who = "thread " + thread_name(w, &w->threads[other]);
    else who = "another thread";
    fail_thread(w,
                "shared memory race: it %s %s, which %s %s in the same barrier interval (no "
                "__syncthreads%s between them)",
                write ? "writes" : "reads", where.c_str(), who.c_str(),
                other_wrote ? "wrote" : "read", same_warp ? " or __syncwarp" : "");
}

/* Checks and records an access of n bytes at cells[off..] by the running thread. */
static void access_cells(Worker *w, RaceCell *cells, bool dyn, size_t off, size_t n, bool write)
{
    int id = (int)(w->cur - w->threads.data()), warp = id >> 5, lane = id & 31;
    const Warp &wp = w->warps[warp];
    uint32_t epoch = w->race.epoch;
    for (size_t i = 0; i < n; i++) {
        RaceCell &c = cells[off + i];
        if (c.epoch != epoch) {
            c.epoch = epoch;
            c.writer = c.rwarp = c.rfirst = c.rlast = kNobody;
            c.rlanes = 0;
        }
        if (c.writer != kNobody && c.writer != id &&
            ((c.writer >> 5) != warp || !synced(wp, c.wseq, 1u << (c.writer & 31) | 1u << lane)))
            report(w, dyn, off + i, write, c.writer, true, (c.writer >> 5) == warp);
        if (write) {
            if (c.rwarp != kNobody) {
                unsigned others = c.rwarp == warp ? c.rlanes & ~(1u << lane) : ~0u;
                if (others && (c.rwarp != warp || !synced(wp, c.rseq, others | 1u << lane))) {
                    int r = c.rfirst != id ? c.rfirst : c.rlast != id ? c.rlast : -1;
                    report(w, dyn, off + i, true, r, false, c.rwarp == warp);
                }
            }
            c.writer = (uint16_t)id;
            c.wseq = wp.seq;
            c.rwarp = c.rfirst = c.rlast = kNobody;
            c.rlanes = 0;
        } else {
            if (c.rwarp == kNobody) {
                c.rwarp = (uint16_t)warp;
                c.rfirst = (uint16_t)id;
                c.rlanes = 0;
            } else if (c.rwarp != warp) {
                c.rwarp = kSeveralWarps;
            }
            c.rlanes |= 1u << lane;
            c.rlast = (uint16_t)id;
            c.rseq = wp.seq;
        }
    }
}

/* Whether [a, a + n) overlaps [lo, lo + len) (n >= 1; an empty window must be at lo = 0, which
 * nothing overlaps): one compare, n being a constant. */
static inline bool overlaps(uintptr_t a, size_t n, uintptr_t lo, uintptr_t len)
{
    return a + n - 1 - lo < len + n - 1;
}

/* The overlap of [a, a + n) with [lo, lo + len), checked in cells (a kernel thread's). */
static void access_part(Worker *w, RaceCell *cells, bool dyn, uintptr_t a, size_t n, uintptr_t lo,
                        uintptr_t len, bool write)
{
    if (!w->running || !w->cur) return; /* not a kernel thread's access (the window is open) */
    size_t off = a < lo ? 0 : a - lo, end = a + n - lo < len ? a + n - lo : len;
    access_cells(w, cells, dyn, off, end - off, write);
}

/* The part of [p, p + n) in the block's shared memory, checked. Every load and store of the
 * kernels comes here: the common case (global memory, the stack) leaves after the worker's
 * lookup and two compares with its window. */
static inline void on_access(const void *p, size_t n, bool write)
{
    if (!race_any.load(std::memory_order_relaxed)) return;
    Worker *w = stack_worker();
    if (!w) return;
    RaceState &r = w->race;
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if (__builtin_expect(overlaps(a, n, r.dyn, r.dyn_len), 0))
        access_part(w, r.dyn_cells.data(), true, a, n, r.dyn, r.dyn_len, write);
    else if (__builtin_expect(overlaps(a, n, r.tls, r.tls_len), 0))
        access_part(w, r.tls_cells.data(), false, a, n, r.tls, r.tls_len, write);
}

void race_access(const void *p, size_t n, bool write)
{
    if (n) on_access(p, n, write);
}

} // namespace gk_emu

/* ---- what -fsanitize=thread code calls (GCC 12's list; no libtsan is linked) ---- */

using gk_emu::on_access;

#define GK_RACE_HOOK extern "C" __attribute__((visibility("hidden"))) void
#define GK_RACE_SIZED(n)                                                                   \
    GK_RACE_HOOK __tsan_read##n(void *p) { on_access(p, n, false); }                       \
    GK_RACE_HOOK __tsan_write##n(void *p) { on_access(p, n, true); }                       \
    GK_RACE_HOOK __tsan_unaligned_read##n(void *p) { on_access(p, n, false); }             \
    GK_RACE_HOOK __tsan_unaligned_write##n(void *p) { on_access(p, n, true); }             \
    GK_RACE_HOOK __tsan_volatile_read##n(void *p) { on_access(p, n, false); }              \
    GK_RACE_HOOK __tsan_volatile_write##n(void *p) { on_access(p, n, true); }              \
    GK_RACE_HOOK __tsan_unaligned_volatile_read##n(void *p) { on_access(p, n, false); }    \
    GK_RACE_HOOK __tsan_unaligned_volatile_write##n(void *p) { on_access(p, n, true); }
GK_RACE_SIZED(1)
GK_RACE_SIZED(2)
GK_RACE_SIZED(4)
GK_RACE_SIZED(8)
GK_RACE_SIZED(16)
GK_RACE_HOOK __tsan_read_range(void *p, unsigned long n) { gk_emu::race_access(p, n, false); }
GK_RACE_HOOK __tsan_write_range(void *p, unsigned long n) { gk_emu::race_access(p, n, true); }
GK_RACE_HOOK __tsan_init(void) {}
GK_RACE_HOOK __tsan_func_entry(void *) {}
GK_RACE_HOOK __tsan_func_exit(void) {}
GK_RACE_HOOK __tsan_vptr_update(void **, void *) {}
GK_RACE_HOOK __tsan_vptr_read(void **) {}

/* Atomics are not races (an atomic racing a plain access is not caught): they just happen. */
#define GK_RACE_ATOMIC(bits, T)                                                                    \
    extern "C" __attribute__((visibility("hidden")))                                               \
    T __tsan_atomic##bits##_load(const volatile T *a, int)                                         \
    {                                                                                              \
        return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                               \
    }                                                                                              \
    GK_RACE_HOOK __tsan_atomic##bits##_store(volatile T *a, T v, int)                              \
    {                                                                                              \
        __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                  \
    }                                                                                              \
    GK_RACE_ATOMIC_RMW(bits, T, exchange, exchange_n)                                              \
    GK_RACE_ATOMIC_RMW(bits, T, fetch_add, fetch_add)                                              \
    GK_RACE_ATOMIC_RMW(bits, T, fetch_sub, fetch_sub)                                              \
    GK_RACE_ATOMIC_RMW(bits, T, fetch_and, fetch_and)                                              \
    GK_RACE_ATOMIC_RMW(bits, T, fetch_or, fetch_or)                                                \
    GK_RACE_ATOMIC_RMW(bits, T, fetch_xor, fetch_xor)                                              \
    GK_RACE_ATOMIC_RMW(bits, T, fetch_nand, fetch_nand)                                            \
    extern "C" __attribute__((visibility("hidden")))                                               \
    int __tsan_atomic##bits##_compare_exchange_strong(volatile T *a, T *c, T v, int, int)          \
    {                                                                                              \
        return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);    \
    }                                                                                              \
    extern "C" __attribute__((visibility("hidden")))                                               \
    int __tsan_atomic##bits##_compare_exchange_weak(volatile T *a, T *c, T v, int, int)            \
    {                                                                                              \
        return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);     \
    }                                                                                              \
    extern "C" __attribute__((visibility("hidden")))                                               \
    T __tsan_atomic##bits##_compare_exchange_val(volatile T *a, T c, T v, int, int)                \
    {                                                                                              \
        __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);          \
        return c;                                                                                  \
    }
#define GK_RACE_ATOMIC_RMW(bits, T, op, builtin)           \
    extern "C" __attribute__((visibility("hidden")))       \
    T __tsan_atomic##bits##_##op(volatile T *a, T v, int)  \
    {                                                      \
        return __atomic_##builtin(a, v, __ATOMIC_SEQ_CST); \
    }
GK_RACE_ATOMIC(8, uint8_t)
GK_RACE_ATOMIC(16, uint16_t)
GK_RACE_ATOMIC(32, uint32_t)
GK_RACE_ATOMIC(64, uint64_t)
GK_RACE_HOOK __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
GK_RACE_HOOK __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
