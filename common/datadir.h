/* datadir.h: where gptkit's installed data (presets in configs/, a GPT-2 vocabulary) lives.
 * Found at run time next to the running binary (BIN/../share/gptkit, so `make install
 * PREFIX=...` works whatever PREFIX the objects were built with), else the compiled-in
 * GPTKIT_DATADIR. Owns nothing; thread-safe (writes only the caller's buffer). */
#ifndef GK_DATADIR_H
#define GK_DATADIR_H

#include <stddef.h>

/* Writes the data directory (no trailing '/') to buf[0..cap) and returns buf. */
const char *gk_datadir(char *buf, size_t cap);

#endif
