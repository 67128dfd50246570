/* store_wire.h: the rendezvous store's wire format, its helpers (store_wire.c) and its server
 * thread (store_server.c, store_serve.c), shared with the client (store.c). Private to
 * kernels/comm.
 *
 * All integers are little-endian. Every message is a frame: u32 body length, then the body. A
 * request body is u8 op then fields; a reply body is u8 status then fields; a field is a u32
 * length then that many bytes. A client sends one request and reads its reply before the next.
 *   HELLO  rank (i64), version (u64), token, pid (i64)
 *                      -> OK the job's longest value (u64) | REFUSED reason (u8), text
 *   SET    key, value               -> OK
 *   GET    key, timeout_ms (u64)    -> OK value | TIMEOUT       (answered once the key exists)
 *   ADD    key, delta (i64)         -> OK result (i64)  (kept as decimal text; missing counts 0)
 *   CHECK  key                      -> OK found (u8)
 *   WAIT   timeout_ms (u64), key... -> OK | TIMEOUT index (u32) of the first key still missing
 *   GONE                            -> OK ranks (i32 each, in the order they left)
 *   RANKS                           -> OK connected (u32): ranks with a connection open now
 *   any                             -> ERR text (a malformed frame closes the connection instead)
 * A connection says HELLO first, with the protocol's VERSION (a HELLO of another version or
 * shape is REFUSED, naming both) and the job's token (empty: none). The server refuses (REFUSED,
 * then closes the connection) a wrong token (compared in constant time), a rank outside the
 * job, and a second connection for a rank already connected; before HELLO a connection may send
 * only HELLO_FRAME bytes and has HELLO_S seconds. The job's world size bounds the rest
 * (gk_store_limits): a value's size, the keys, their bytes in all (ERR to the request that would
 * pass them) and the connections waiting for their HELLO (the oldest is refused when one more
 * comes). The server answers GET and WAIT when their keys exist or when the request's timeout
 * passes; the client allows it GRACE_S more, then drops the connection.
 * Thread safety: the helpers are pure; a server's state belongs to its thread. */
#ifndef GK_STORE_WIRE_H
#define GK_STORE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

enum { OP_HELLO = 1, OP_SET, OP_GET, OP_ADD, OP_CHECK, OP_WAIT, OP_GONE, OP_RANKS };
enum { ST_OK = 0, ST_TIMEOUT = 1, ST_ERR = 2, ST_REFUSED = 3 };
/* Why a HELLO was refused (REFUSED's first field). */
enum { RF_VERSION = 1, RF_TOKEN, RF_RANK, RF_DUPLICATE, RF_BUSY };
#define VERSION 2
#define MAX_KEY 255
#define MAX_TOKEN 256
#define MAX_VALUE ((size_t)16 << 20) /* any job's; gk_store_limits: this job's */
#define MAX_FRAME (MAX_VALUE + 65536)
#define MAX_RANK (1 << 24)
#define HELLO_FRAME 1024             /* a frame before HELLO, at most */
#define HELLO_S 10.0                 /* a connection's time to say HELLO */
#define GRACE_S 2.0 /* how much longer a client waits for the answer to GET or WAIT */

/* Seconds on the monotonic clock; milliseconds left until deadline, rounded up, 0 if past. */
double gk_store_now(void);
int gk_store_ms_until(double deadline);

void gk_store_put_u32(uint8_t *p, uint32_t v);
uint32_t gk_store_get_u32(const uint8_t *p);
void gk_store_put_u64(uint8_t *p, uint64_t v);
uint64_t gk_store_get_u64(const uint8_t *p);

/* A growable byte buffer: n bytes held, cap allocated, off already consumed or sent. */
typedef struct gk_store_buf {
    uint8_t *p;
    size_t n, cap, off;
} gk_store_buf;

/* These return 0, or -1 when out of memory. */
int gk_store_buf_reserve(gk_store_buf *b, size_t more);
int gk_store_buf_put(gk_store_buf *b, const void *p, size_t n);
int gk_store_buf_field(gk_store_buf *b, const void *p, size_t n);
/* Starts a frame with code (op or status), or-ing failure into *fail; returns where its length
 * goes, which gk_store_frame_end fills in. */
size_t gk_store_frame_begin(gk_store_buf *b, int code, int *fail);
void gk_store_frame_end(gk_store_buf *b, size_t at);

/* A reader over n bytes; each function returns 0, or -1 when the bytes are malformed. */
typedef struct gk_store_rd {
    const uint8_t *p;
    size_t n;
} gk_store_rd;

int gk_store_rd_field(gk_store_rd *r, const uint8_t **p, size_t *n);
int gk_store_rd_u64(gk_store_rd *r, uint64_t *v);
/* A key: 1..MAX_KEY bytes without NUL, copied into key[MAX_KEY + 1] as a string. */
int gk_store_rd_key(gk_store_rd *r, char *key);

/* What a job of `world` ranks (0: unknown, taken as 64) may hold in the store: a value of up to
 * value bytes (64 KiB, and 256 more per rank: Gloo's address lists), keys (64 + 16 per rank),
 * bytes of keys and values in all (1 MiB + 512 per rank squared), frames of up to frame bytes,
 * and connections waiting for their HELLO (8 + the ranks). */
typedef struct gk_store_limits {
    size_t value, keys, bytes, frame;
    int pending;
} gk_store_limits;
void gk_store_limits_for(gk_store_limits *l, int world);

/* The server: a thread listening at host:port (0: any free port; *bound: the port), where the
 * store's options say (store.h: loopback or host's address, else every address); it refuses
 * clients whose HELLO lacks token (NULL: accepts any) or names a rank not below world (0: any). */
typedef struct gk_store_server gk_store_server;
typedef struct gk_store_config {
    const char *host, *token;
    int port, world, local;
    double stop_wait;
} gk_store_config;
int gk_store_server_start(gk_store_server **out, const gk_store_config *cf, int *bound, gk_err *e);
/* The numeric address it listens on ("127.0.0.1", "::" for every address). */
const char *gk_store_server_bound(const gk_store_server *sv);
/* Stops and frees it: at once (how 'n'), or when every ranked connection has closed, at most
 * stop_wait seconds from now (how 'w'); it answers requests meanwhile. */
void gk_store_server_stop(gk_store_server *sv, char how);

#endif
