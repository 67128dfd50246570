/* test_backend_open.c: gk_backend_open (backend.h): the device names, the one-line errors for an
 * unknown name and a missing CUDA library, the attention setting, and the refusal of a backend
 * library with another ABI version or no GPU, using tiny fake libraries built here with
 * cc -shared and named by the open options' cuda_lib (the tools' $GPT_CUDA_LIB); the host
 * backends' allocations (aligned, zeroed, large ones on 2 MB boundaries for huge pages), what a
 * backend says of the slots it serves with the reference code (props.ref_ops: none), and the CPU
 * backend's idle OpenMP threads. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/mem.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_peak.h"
#include "test.h"

static const char *cuda_lib; /* the opts' cuda_lib (a tool's $GPT_CUDA_LIB), or NULL */

static int open_dev(gk_backend **be, const char *device, int threads, gk_err *e)
{
    gk_backend_opts o = {.device = device,
                         .threads = threads,
                         .bf16 = -1,
                         .attention = GK_ATTN_AUTO,
                         .cuda_lib = cuda_lib};
    return gk_backend_open(be, &o, e);
}

static void test_cpu_and_ref(void)
{
    gk_backend *be = NULL;
    gk_err e = {0};
    char what[128];
    CHECK(open_dev(&be, "cpu", 3, &e) == 0);
    CHECK(be && strcmp(be->ops->name, "cpu") == 0);
    CHECKF(strcmp(gk_backend_describe(be, what, sizeof what), "cpu (3 threads)") == 0, "%s", what);
    gk_backend_free(be);
    CHECK(open_dev(&be, "cpu", 1, &e) == 0);
    CHECKF(strcmp(gk_backend_describe(be, what, sizeof what), "cpu (1 thread)") == 0, "%s", what);
    gk_backend_free(be);
    CHECK(open_dev(&be, "ref", 0, &e) == 0);
    CHECK(be && strcmp(be->ops->name, "ref") == 0);
    CHECK(strcmp(gk_backend_describe(be, what, sizeof what), "ref") == 0);
    gk_backend_free(be);
}

/* props of the host backends and the emulator (hand-checked): their kind, the device's name,
 * host memory of the host's MemTotal (the emulator's device memory is the host's too), no bf16
 * peak (a CPU's and the emulator's speed are no GPU's), recompute none on the CPU, gelu on cuda. */
static void test_props(void)
{
    static const struct { const char *dev; int kind; const char *name; int recompute; } cases[] = {
        {"cpu", GK_KIND_CPU, "CPU", 0}, {"ref", GK_KIND_REF, "CPU", 0},
        {"cuda-emu", GK_KIND_CUDA_EMU, "gptkit CUDA emulator", 1},
    };
    gk_host_mem h;
    gk_host_mem_read(&h);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        gk_backend *be = NULL;
        gk_err e = {0};
        int rc = open_dev(&be, cases[i].dev, 1, &e);
        if (rc == GK_ENOTFOUND && i == 2) { /* built without the emulator's library */
            printf("  skip %s: %s\n", cases[i].dev, e.msg);
            continue;
        }
        CHECKF(rc == 0, "%s: %s", cases[i].dev, e.msg);
        if (rc) continue;
        const gk_backend_props *p = &be->props;
        CHECKF(p->kind == cases[i].kind && strcmp(p->device, cases[i].name) == 0, "%s: %d '%s'",
               cases[i].dev, p->kind, p->device);
        CHECKF(p->host_memory == 1 && p->bf16_peak_flops == 0 &&
               p->recompute == cases[i].recompute, "%s: host %d peak %g recompute %d", cases[i].dev,
               p->host_memory, p->bf16_peak_flops, p->recompute);
        CHECKF(p->memory_bytes == h.total && h.total > 0, "%s: %zu bytes, MemTotal %zu",
               cases[i].dev, p->memory_bytes, h.total);
        /* every slot its own code (cpu once ran the reference's where a caller reserved too
         * little scratch, unsaid); a slot listed is said in the description */
        CHECKF(p->ref_ops[0] == 0, "%s: the reference code serves '%s'", cases[i].dev, p->ref_ops);
        char what[256], want[256];
        snprintf(want, sizeof want, "%s, reference code for layernorm_bwd gemm(q8)", be->what);
        snprintf(be->props.ref_ops, sizeof be->props.ref_ops, "layernorm_bwd gemm(q8)");
        CHECKF(strcmp(gk_backend_describe(be, what, sizeof what), want) == 0, "%s", what);
        gk_backend_free(be);
    }
}

static double process_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The CPU backend's idle threads (cpu.c, linked in here by gk_backend_open's cpu): a thread
 * waiting for the next parallel region gives its core up after a short spin (cpu.c bounds
 * libgomp's, 8 ms by default, so that processes sharing cores do not spin against each
 * other): a 50 ms sleep of the main thread after a region costs the process almost no CPU. The
 * bound, 5 ms on the least of 5 tries, is under libgomp's own spin (7-8 ms) and leaves room for
 * the wake-ups of a loaded machine under ASan (2.8 ms, the least of 3, seen in make check). */
static void test_idle_threads_sleep(void)
{
    if (getenv("OMP_WAIT_POLICY")) SKIP("OMP_WAIT_POLICY is set");
    const char *spin = getenv("GOMP_SPINCOUNT");
    double least = 1e9;
    for (int r = 0; r < 5; r++) {
        int ran[2] = {0, 0};
#pragma omp parallel num_threads(2)
        ran[omp_get_thread_num() & 1] = 1;
        double c0 = process_cpu_ms();
        nanosleep(&(struct timespec){0, 50000000}, NULL);
        double used = process_cpu_ms() - c0;
        least = used < least ? used : least;
        CHECK(ran[0]);
    }
    CHECKF(least < 5.0, "idle threads used %.1f ms of CPU in a 50 ms sleep (GOMP_SPINCOUNT %s)",
           least, spin ? spin : "unset");
}

/* cpu's alloc: 64-byte aligned and zeroed at every size; slots of 4 MB and more start on a 2 MB
 * boundary (host_mem.c: huge pages), and every byte asked for is writable (ASan checks). */
static void test_host_alloc(void)
{
    gk_backend *be = NULL;
    gk_err e = {0};
    CHECK(open_dev(&be, "cpu", 1, &e) == 0);
    const size_t sizes[] =
        {0, 1, 100, ((size_t)4 << 20) - 64, (size_t)4 << 20, ((size_t)9 << 20) + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = sizes[i];
        unsigned char *p = be->ops->alloc(be, n);
        CHECK(p != NULL);
        if (!p)
            continue;
        uintptr_t a = (uintptr_t)p;
        CHECK(a % 64 == 0);
        CHECK(n < ((size_t)4 << 20) || a % ((size_t)2 << 20) == 0);
        int zero = 1;
        for (size_t j = 0; j < n; j++) zero &= p[j] == 0;
        CHECK(zero);
        if (n)
            memset(p, 0xa5, n);
        be->ops->free(be, p);
    }
    gk_backend_free(be);
}

/* The CUDA backend's bf16 peaks by the GPU's name (NVIDIA's datasheets, dense): the more specific
 * name first (an H100 PCIe is not an SXM H100; an L40S not an L4); nothing for a GPU not in the
 * table or the emulator. */
static void test_peak_table(void)
{
    static const struct { const char *name; double tflops; } cases[] = {
        {"NVIDIA H100 80GB HBM3", 989.5}, {"NVIDIA H100 PCIe", 756}, {"NVIDIA H100 NVL", 835},
        {"NVIDIA H200", 989.5},           {"NVIDIA A100-SXM4-80GB", 312}, {"NVIDIA L40S", 362},
        {"NVIDIA L4", 121},               {"NVIDIA GeForce RTX 4090", 165.2},
        {"NVIDIA GH200 480GB", 989.5},    {"Tesla T4", 0}, {"gptkit CUDA emulator", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        CHECKF(gk_cuda_peak_bf16_flops(cases[i].name) == cases[i].tflops * 1e12, "%s: %g",
               cases[i].name, gk_cuda_peak_bf16_flops(cases[i].name));
}

static void test_unknown_name(void)
{
    gk_backend *be = NULL;
    gk_err e = {0};
    CHECK(open_dev(&be, "gpu", 0, &e) == GK_EUSAGE);
    CHECK(be == NULL);
    CHECKF(strcmp(e.msg, "device 'gpu': not one of cpu, ref, cuda, cuda-emu, auto") == 0, "%s",
           e.msg);
}

/* No libgptkit-cuda*.so can be loaded: "cuda" is one clear error, "auto" is the CPU. The build
 * puts the real libraries in ../lib beside this test, so "not found" is checked only when they
 * are not there. */
static void test_cuda_missing(void)
{
    cuda_lib = NULL;
    gk_backend *be = NULL;
    gk_err e = {0};
    char exe[4096], lib[4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(lib, sizeof lib, "%s/../lib/libgptkit-cuda.so", exe);
    if (access(lib, F_OK) != 0 && open_dev(&be, "cuda", 0, &e) == GK_ENOTFOUND)
        CHECKF(strcmp(e.msg, "device cuda: libgptkit-cuda.so not found (gptkit was built without "
                      "CUDA, or it is not installed)") == 0, "%s", e.msg);
    CHECK(be == NULL);
    e = (gk_err){0};
    e = (gk_err){0};
    cuda_lib = "/nonexistent/libgptkit-cuda.so";
    CHECK(open_dev(&be, "auto", 2, &e) == 0);
    CHECK(be && strcmp(be->ops->name, "cpu") == 0 && e.code == 0);
    CHECKF(be && be->note[0] == 0, "no library is no news: '%s'", be ? be->note : "");
    gk_backend_free(be);
    cuda_lib = "/nonexistent/libgptkit-cuda.so";
    CHECK(open_dev(&be, "cuda", 0, &e) == GK_ENOTFOUND);
    CHECKF(strstr(e.msg, "device cuda: GPT_CUDA_LIB=/nonexistent/libgptkit-cuda.so: ") == e.msg,
           "%s", e.msg);
    cuda_lib = NULL;
}

/* The attention setting (gk_backend_opts.attention): the names both ways, a bad value naming the
 * setting; the CPU ignores it; cuda-emu refuses cudnn with one line at open (no cuDNN under the
 * emulator) and a path number out of range. (That auto takes the fa2 kernels, and each path its
 * own: test_ops, test_attention.) */
static void test_attention_setting(void)
{
    gk_err e = {0};
    int a = -1;
    for (int i = GK_ATTN_AUTO; i <= GK_ATTN_PLAIN; i++) {
        CHECK_OK(gk_attention_parse(gk_attention_name(i), "attention", &a, &e), &e);
        CHECKF(a == i, "%s parsed as %d", gk_attention_name(i), a);
    }
    CHECKF(gk_attention_parse("cuDNN", "--attention", &a, &e) == GK_EUSAGE &&
               !strcmp(e.msg, "--attention: 'cuDNN' is not one of auto, cudnn, flash, fa2, plain"),
           "bad value: %s", e.msg);
    gk_backend *be = NULL;
    gk_backend_opts o = {.device = "cpu", .threads = 1, .bf16 = 0, .attention = GK_ATTN_CUDNN};
    CHECK_OK(gk_backend_open(&be, &o, &e), &e);
    gk_backend_free(be), be = NULL;
    o = (gk_backend_opts){.device = "cuda-emu", .bf16 = 1, .attention = GK_ATTN_PLAIN};
    if (gk_backend_open(&be, &o, &e) == GK_ENOTFOUND) { /* built without the emulator's library */
        printf("  skip cuda-emu: %s\n", e.msg);
        return;
    }
    gk_backend_free(be), be = NULL;
    o.attention = GK_ATTN_CUDNN, e.code = 0;
    CHECKF(gk_backend_open(&be, &o, &e) == GK_EIO && !be &&
               strstr(e.msg, "cuda-emu backend: attention = cudnn: cuDNN does not run under the "
                             "CUDA emulator") && !strchr(e.msg, '\n'),
           "cudnn on the emulator: %d %s", e.code, e.msg);
    o.attention = GK_ATTN_PLAIN + 1;
    CHECKF(gk_backend_open(&be, &o, &e) == GK_EUSAGE && !be, "path %d: %s", o.attention, e.msg);
}

/* Builds dir/NAME.so from src; 0, or -1 when no C compiler is at hand. */
static int build_so(const char *dir, const char *name, const char *src, char *so, size_t n)
{
    char c[512], cmd[2048];
    snprintf(c, sizeof c, "%s/%s.c", dir, name);
    snprintf(so, n, "%s/%s.so", dir, name);
    FILE *f = fopen(c, "w");
    if (!f)
        return -1;
    fputs(src, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -o '%s' '%s' 2>/dev/null", so, c);
    return system(cmd) == 0 ? 0 : -1;
}

/* A fake entry: ABI version, no device, create never reached. */
static const char fake_src[] =
    "typedef struct { int abi; const char *name; "
    "int (*count)(void *); int (*create)(void **, void *); } entry;\n"
    "static int count(void *e) { (void)e; return 0; }\n"
    "static int create(void **o, void *e) { (void)o; (void)e; return -1; }\n"
    "static const entry en = {ABI, \"cuda\", count, create};\n"
    "const entry *gk_cuda_backend_entry(void) { return &en; }\n";

static void test_fake_libraries(void)
{
    char dir[] = "/tmp/gk-backend-open-XXXXXX", so[600], src[1024];
    if (!mkdtemp(dir)) {
        SKIP("mkdtemp failed");
        return;
    }
    gk_backend *be = NULL;
    gk_err e = {0};
    snprintf(src, sizeof src, "#define ABI %d\n%s", GK_BACKEND_ABI + 41, fake_src);
    int built = build_so(dir, "wrongabi", src, so, sizeof so) == 0;
    if (built) {
        cuda_lib = so;
        CHECK(open_dev(&be, "cuda", 0, &e) == GK_EFORMAT);
        char want[1024];
        snprintf(want, sizeof want, "device cuda: %s has backend ABI version %d, this gptkit needs "
                 "%d (install the library built with these tools)", so, GK_BACKEND_ABI + 41,
                 GK_BACKEND_ABI);
        CHECKF(strcmp(e.msg, want) == 0, "%s", e.msg);
        CHECK(be == NULL);

        snprintf(src, sizeof src, "#define ABI %d\n%s", GK_BACKEND_ABI, fake_src);
        CHECK(build_so(dir, "nogpu", src, so, sizeof so) == 0);
        cuda_lib = so;
        CHECK(open_dev(&be, "cuda", 0, &e) == GK_ENOTFOUND);
        CHECKF(strcmp(e.msg, "device cuda: no CUDA GPU found") == 0, "%s", e.msg);
        e = (gk_err){0};
        CHECK(open_dev(&be, "auto", 1, &e) == 0); /* no GPU: the CPU */
        CHECK(be && strcmp(be->ops->name, "cpu") == 0);
        CHECKF(be && be->note[0] == 0, "no GPU is no news: '%s'", be ? be->note : "");
        gk_backend_free(be);

        /* a library that is there but does not load: the CPU, and a note saying why */
        snprintf(src, sizeof src, "#define ABI %d\n%s", GK_BACKEND_ABI + 41, fake_src);
        CHECK(build_so(dir, "wrongabi", src, so, sizeof so) == 0);
        cuda_lib = so;
        CHECK(open_dev(&be, "auto", 1, &e) == 0);
        CHECK(be && strcmp(be->ops->name, "cpu") == 0);
        snprintf(want, sizeof want, "device auto: the CPU, since device cuda: %s has backend ABI "
                 "version %d", so, GK_BACKEND_ABI + 41);
        CHECKF(be && strstr(be->note, want) == be->note, "note: '%s'", be ? be->note : "");
        gk_backend_free(be);

        CHECK(build_so(dir, "noentry", "int gk_something_else(void) { return 1; }\n", so,
                       sizeof so) == 0);
        cuda_lib = so;
        CHECK(open_dev(&be, "cuda-emu", 0, &e) == GK_EFORMAT);
        CHECKF(strstr(e.msg, "has no gk_cuda_backend_entry (not a gptkit backend library)"), "%s",
               e.msg);
        cuda_lib = NULL;
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    if (!built)
        SKIP("no C compiler (cc) to build a fake backend library");
}

int main(void)
{
    RUN(test_cpu_and_ref);
    RUN(test_props);
    RUN(test_host_alloc);
    RUN(test_idle_threads_sleep);
    RUN(test_peak_table);
    RUN(test_unknown_name);
    RUN(test_cuda_missing);
    RUN(test_attention_setting);
    RUN(test_fake_libraries);
    return TEST_END();
}
