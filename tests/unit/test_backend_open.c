/* test_backend_open.c: gk_backend_open (backend.h): the device names, the one-line errors for an
 * unknown name and a missing CUDA library, and the refusal of a backend library with another ABI
 * version or no GPU, using tiny fake libraries built here with cc -shared and named by
 * $GPT_CUDA_LIB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "test.h"

static int open_dev(gk_backend **be, const char *device, int threads, gk_err *e)
{
    gk_backend_opts o = {device, threads, -1, 0, GK_ATTN_AUTO};
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

static void test_unknown_name(void)
{
    gk_backend *be = NULL;
    gk_err e = {0};
    CHECK(open_dev(&be, "gpu", 0, &e) == GK_EUSAGE);
    CHECK(be == NULL);
    CHECKF(strcmp(e.msg, "device 'gpu': not one of cpu, ref, cuda, cuda-emu, auto") == 0, "%s", e.msg);
}

/* No libgptkit-cuda*.so can be loaded: "cuda" is one clear error, "auto" is the CPU. The build
 * puts the real libraries in ../lib beside this test, so "not found" is checked only when they
 * are not there. */
static void test_cuda_missing(void)
{
    unsetenv("GPT_CUDA_LIB");
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
    setenv("GPT_CUDA_LIB", "/nonexistent/libgptkit-cuda.so", 1);
    CHECK(open_dev(&be, "auto", 2, &e) == 0);
    CHECK(be && strcmp(be->ops->name, "cpu") == 0 && e.code == 0);
    CHECKF(be && be->note[0] == 0, "no library is no news: '%s'", be ? be->note : "");
    gk_backend_free(be);
    setenv("GPT_CUDA_LIB", "/nonexistent/libgptkit-cuda.so", 1);
    CHECK(open_dev(&be, "cuda", 0, &e) == GK_ENOTFOUND);
    CHECKF(strstr(e.msg, "device cuda: GPT_CUDA_LIB=/nonexistent/libgptkit-cuda.so: ") == e.msg,
           "%s", e.msg);
    unsetenv("GPT_CUDA_LIB");
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
    "typedef struct { int abi; const char *name; int (*count)(void *); int (*create)(void **, void *); } entry;\n"
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
        setenv("GPT_CUDA_LIB", so, 1);
        CHECK(open_dev(&be, "cuda", 0, &e) == GK_EFORMAT);
        char want[1024];
        snprintf(want, sizeof want, "device cuda: %s has backend ABI version %d, this gptkit needs "
                 "%d (install the library built with these tools)", so, GK_BACKEND_ABI + 41,
                 GK_BACKEND_ABI);
        CHECKF(strcmp(e.msg, want) == 0, "%s", e.msg);
        CHECK(be == NULL);

        snprintf(src, sizeof src, "#define ABI %d\n%s", GK_BACKEND_ABI, fake_src);
        CHECK(build_so(dir, "nogpu", src, so, sizeof so) == 0);
        setenv("GPT_CUDA_LIB", so, 1);
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
        setenv("GPT_CUDA_LIB", so, 1);
        CHECK(open_dev(&be, "auto", 1, &e) == 0);
        CHECK(be && strcmp(be->ops->name, "cpu") == 0);
        snprintf(want, sizeof want, "device auto: the CPU, since device cuda: %s has backend ABI "
                 "version %d", so, GK_BACKEND_ABI + 41);
        CHECKF(be && strstr(be->note, want) == be->note, "note: '%s'", be ? be->note : "");
        gk_backend_free(be);

        CHECK(build_so(dir, "noentry", "int gk_something_else(void) { return 1; }\n", so, sizeof so) == 0);
        setenv("GPT_CUDA_LIB", so, 1);
        CHECK(open_dev(&be, "cuda-emu", 0, &e) == GK_EFORMAT);
        CHECKF(strstr(e.msg, "has no gk_cuda_backend_entry (not a gptkit backend library)"), "%s", e.msg);
        unsetenv("GPT_CUDA_LIB");
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
    RUN(test_unknown_name);
    RUN(test_cuda_missing);
    RUN(test_fake_libraries);
    return TEST_END();
}
