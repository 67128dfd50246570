/* datadir.h: where gptkit's installed data (presets in configs/, a GPT-2 vocabulary) lives.
 * Found at run time next to the running binary (BIN/../share/gptkit, so `make install
 * PREFIX=...` works whatever PREFIX the objects were built with), else the compiled-in
 * GPTKIT_DATADIR; and, for the presets, the checkout a build directory is in. Owns nothing;
 * thread-safe (writes only the caller's buffer). */
#ifndef GK_DATADIR_H
#define GK_DATADIR_H

#include <stddef.h>

/* Writes the data directory (no trailing '/') to buf[0..cap) and returns buf. */
const char *gk_datadir(char *buf, size_t cap);

/* When the running binary is in a build directory at the top of a gptkit checkout (BUILD/bin,
 * as build/bin after a plain `make`): that checkout's train/configs, written to buf[0..cap)
 * and returned; else NULL. So the presets are found from a clone before `make install`. */
const char *gk_datadir_checkout_configs(char *buf, size_t cap);

#endif
