/* emu.h: the CUDA emulator, a test harness that runs kernels/cuda/ on the CPU (C++17, g++): the
 * launcher behind GK_LAUNCH. The CUDA subset it supports and how it runs: kernels/emu/README.md. */
#ifndef GK_EMU_H
#define GK_EMU_H

#include <stdio.h>

#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/emu/emu_bf16.h"
#include "kernels/emu/emu_device.h"
#include "kernels/emu/emu_runtime.h"
#include "kernels/emu/emu_wmma.h"

namespace gk_emu {
struct LaunchSpec {
    const char *name; /* the kernel as written in GK_LAUNCH */
    const void *func; /* its address: the key of cudaFuncSetAttribute */
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
};
typedef void (*BodyFn)(const void *closure);
/* a copy of it that owns its arguments */
typedef std::shared_ptr<const void> (*KeepFn)(const void *closure);

/* Runs body(closure) once per thread of the grid; errors go where cudaGetLastError finds them.
 * On a capturing stream it records keep(closure) instead, for cudaGraphLaunch to run. */
GK_EMU_API void launch(const LaunchSpec &spec, BodyFn body, const void *closure, KeepFn keep);

/* GK_LAUNCH(k, grid, block, smem, stream, args...) is launcher(...)(args...): the arguments are
 * converted to the kernel's parameter types once, as by <<<...>>>, and every thread calls k with
 * copies of them (a captured launch keeps a heap copy of them for its replays). */
template <class... P> struct Launcher {
    LaunchSpec spec;
    void (*fn)(P...);
    template <class... A> void operator()(A &&...args) const
    {
        static_assert(sizeof...(A) == sizeof...(P),
                      "kernel launched with the wrong number of arguments");
        struct Closure {
            void (*fn)(P...);
            std::tuple<typename std::decay<P>::type...> args;
        };
        const Closure c{fn, std::tuple<typename std::decay<P>::type...>(std::forward<A>(args)...)};
        launch(
            spec,
            [](const void *p) {
                const Closure *cl = static_cast<const Closure *>(p);
                std::apply(cl->fn, cl->args);
            },
            &c,
            [](const void *p) -> std::shared_ptr<const void> {
                return std::make_shared<Closure>(*static_cast<const Closure *>(p));
            });
    }
};
template <class... P>
inline Launcher<P...> launcher(const char *name, void (*fn)(P...), dim3 grid, dim3 block,
                               size_t smem, cudaStream_t stream)
{
    return Launcher<P...>{{name, reinterpret_cast<const void *>(fn), grid, block, smem, stream},
                          fn};
}
} // namespace gk_emu

#endif
