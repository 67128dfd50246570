/* backend_open.c: one way to get a backend from a device name (gk_backend_open).
 * Owns: the device names, the run-time loading of the CUDA backend libraries (dlopen, one entry
 * symbol, the ABI check) and the one-line error for each way that fails. A loaded library is
 * never closed once a backend came from it: its code runs until the process ends. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu.h"
#include "kernels/ref/ref.h"

#define NOT_BUILT "(gptkit was built without CUDA, or it is not installed)"

/* The binary's ../lib/NAME in buf; 0, or -1 when /proc/self/exe cannot be read. */
static int beside_binary(char *buf, size_t n, const char *name)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return -1;
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = 0;
    int w = snprintf(buf, n, "%s/../lib/%s", exe, name);
    return w > 0 && (size_t)w < n ? 0 : -1;
}

/* RTLD_NODELETE: a library closed again (no GPU, wrong ABI) stays mapped, since unloading the C++
 * runtime it brought would leave its allocations (libstdc++'s exception pool) dangling. */
#define GK_DLOPEN_FLAGS (RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)

/* dlopens the library for device (file name lib): env (the opts' cuda_lib, a tool's
 * $GPT_CUDA_LIB) when set, else beside the binary, else the search path. *where gets the path or
 * name that was tried last, for messages. */
static int load_library(void **h, const char *device, const char *lib, const char *env, char *where,
                        size_t n, gk_err *e)
{
    if (env && *env) {
        snprintf(where, n, "%s", env);
        if ((*h = dlopen(env, GK_DLOPEN_FLAGS)))
            return 0;
        const char *why = dlerror();
        return gk_errf(e, access(env, F_OK) ? GK_ENOTFOUND : GK_EFORMAT,
                       "device %s: GPT_CUDA_LIB=%s: %s", device, env, why ? why : "cannot load");
    }
    if (beside_binary(where, n, lib) == 0 && access(where, F_OK) == 0) {
        if ((*h = dlopen(where, GK_DLOPEN_FLAGS)))
            return 0;
        const char *why = dlerror();
        return gk_errf(e, GK_EFORMAT, "device %s: %s", device, why ? why : where);
    }
    snprintf(where, n, "%s", lib);
    if ((*h = dlopen(lib, GK_DLOPEN_FLAGS)))
        return 0;
    const char *why = dlerror();
    if (!why || strstr(why, "No such file"))
        return gk_errf(e, GK_ENOTFOUND, "device %s: %s not found " NOT_BUILT, device, lib);
    return gk_errf(e, GK_EFORMAT, "device %s: %s", device, why);
}

/* Loads the library of device ("cuda" or "cuda-emu") and checks its entry: *entry and *h, or an
 * error (the library closed again). */
static int load_entry(const gk_backend_entry **entry, void **h, const char *device,
                      const char *cuda_lib, gk_err *e)
{
    const char *lib = strcmp(device, "cuda") == 0 ? "libgptkit-cuda.so" : "libgptkit-cuda-emu.so";
    char where[PATH_MAX + 32];
    int rc = load_library(h, device, lib, cuda_lib, where, sizeof where, e);
    if (rc)
        return rc;
    gk_backend_entry_fn fn = (gk_backend_entry_fn)dlsym(*h, GK_BACKEND_ENTRY_SYMBOL);
    const gk_backend_entry *en = fn ? fn() : NULL;
    if (!fn)
        rc = gk_errf(e, GK_EFORMAT, "device %s: %s has no %s (not a gptkit backend library)",
                     device, where, GK_BACKEND_ENTRY_SYMBOL);
    else if (!en || en->abi != GK_BACKEND_ABI)
        rc = gk_errf(e, GK_EFORMAT,
                     "device %s: %s has backend ABI version %d, this gptkit needs %d (install the "
                     "library built with these tools)",
                     device, where, en ? en->abi : -1, GK_BACKEND_ABI);
    else if (!en->device_count || !en->create)
        rc = gk_errf(e, GK_EFORMAT, "device %s: %s: incomplete backend entry", device, where);
    if (rc) {
        dlclose(*h);
        *h = NULL;
        return rc;
    }
    *entry = en;
    return 0;
}

/* cuda / cuda-emu: load, count the devices, create. */
static int open_cuda(gk_backend **out, const char *device, const gk_backend_opts *o, gk_err *e)
{
    const gk_backend_entry *en = NULL;
    void *h = NULL;
    int rc = load_entry(&en, &h, device, o->cuda_lib, e);
    if (rc)
        return rc;
    int n = en->device_count(e);
    if (n == 0)
        rc = gk_errf(e, GK_ENOTFOUND, "device %s: no CUDA GPU found", device);
    else if (n < 0)
        rc = n;
    if (!rc)
        rc = en->create(out, o, e);
    if (rc)
        dlclose(h); /* no backend came from it */
    return rc;
}

/* The CPU backends: fp32 activations whatever o->bf16 asks. */
static int open_cpu(gk_backend **out, const char *device, const gk_backend_opts *o, gk_err *e)
{
    if (strcmp(device, "ref") == 0) return gk_ref_create(out, e);
    return gk_cpu_create(out, o->threads, e);
}

int gk_backend_open(gk_backend **out, const gk_backend_opts *o, gk_err *e)
{
    const char *device = o->device ? o->device : "cpu";
    *out = NULL;
    if (strcmp(device, "cpu") == 0 || strcmp(device, "ref") == 0)
        return open_cpu(out, device, o, e);
    if (strcmp(device, "cuda") == 0 || strcmp(device, "cuda-emu") == 0)
        return open_cuda(out, device, o, e);
    if (strcmp(device, "auto") == 0) {
        gk_err why = {0};
        if (open_cuda(out, "cuda", o, &why) == 0)
            return 0;
        if (o->attention == GK_ATTN_CUDNN && why.code != GK_ENOTFOUND) {
            *e = why; /* a GPU without cuDNN: not the CPU, which was not asked for */
            return why.code;
        }
        int rc = open_cpu(out, "cpu", o, e);
        /* no library or no GPU is the quiet case; a library or GPU that failed is worth a word */
        if (!rc && why.code != GK_ENOTFOUND)
            snprintf((*out)->note, sizeof(*out)->note, "device auto: the CPU, since %.470s",
                     why.msg);
        return rc;
    }
    return gk_errf(e, GK_EUSAGE, "device '%s': not one of cpu, ref, cuda, cuda-emu, auto", device);
}

static const char *const attention_names[] = {"auto", "cudnn", "flash", "fa2", "plain"};
#define N_ATTENTION (int)(sizeof attention_names / sizeof attention_names[0])

int gk_attention_parse(const char *s, const char *setting, int *out, gk_err *e)
{
    for (int i = 0; s && i < N_ATTENTION; i++)
        if (strcmp(s, attention_names[i]) == 0) {
            *out = i;
            return 0;
        }
    return gk_errf(e, GK_EUSAGE, "%s: '%s' is not one of auto, cudnn, flash, fa2, plain", setting,
                   s ? s : "");
}

const char *gk_attention_name(int a)
{
    return a >= 0 && a < N_ATTENTION ? attention_names[a] : "?";
}

const char *gk_backend_describe(const gk_backend *be, char *buf, size_t n)
{
    const char *name = be && be->ops && be->ops->name ? be->ops->name : "?";
    if (be && be->props.ref_ops[0]) /* a slot served by the reference code: a speed cliff, said */
        snprintf(buf, n, "%s, reference code for %.*s", be->what[0] ? be->what : name,
                 (int)sizeof be->props.ref_ops, be->props.ref_ops);
    else
        snprintf(buf, n, "%s", be && be->what[0] ? be->what : name);
    return buf;
}
