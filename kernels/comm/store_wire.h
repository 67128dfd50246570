/* store_wire.h: the rendezvous store's wire format and its server thread, shared by store.c
 * (the client, and these helpers) and store_server.c (the server). Private to kernels/comm.
 *
 * All integers are little-endian. Every message is a frame: u32 body length, then the body. A
 * request body is u8 op then fields; a reply body is u8 status then fields; a field is a u32
 * length then that many bytes. A client sends one request and reads its reply before the next.
 *   HELLO  rank (i64)               -> OK
 *   SET    key, value               -> OK
 *   GET    key, timeout_ms (u64)    -> OK value | TIMEOUT       (answered once the key exists)
 *   ADD    key, delta (i64)         -> OK result (i64)  (kept as decimal text; missing counts 0)
 *   CHECK  key                      -> OK found (u8)
 *   WAIT   timeout_ms (u64), key... -> OK | TIMEOUT index (u32) of the first key still missing
 *   GONE                            -> OK ranks (i32 each, in the order they left)
 *   any                             -> ERR text (a malformed frame closes the connection instead)
 * A connection says HELLO first. The server answers GET and WAIT when their keys exist or when
 * the request's timeout passes; the client allows it GRACE_S more, then drops the connection.
 * Thread safety: the helpers are pure; a server's state belongs to its thread. */
#ifndef GK_STORE_WIRE_H
#define GK_STORE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

enum { OP_HELLO = 1, OP_SET, OP_GET, OP_ADD, OP_CHECK, OP_WAIT, OP_GONE };
enum { ST_OK = 0, ST_TIMEOUT = 1, ST_ERR = 2 };
#define MAX_KEY 255
#define MAX_VALUE ((size_t)64 << 20)
#define MAX_FRAME (MAX_VALUE + 65536)
#define MAX_RANK (1 << 24)
#define GRACE_S 2.0 /* how much longer a client waits for the answer to GET or WAIT */

/* Seconds on the monotonic clock; milliseconds left until deadline, rounded up, 0 if past. */
double gks_now(void);
int gks_ms_until(double deadline);

void gks_put_u32(uint8_t *p, uint32_t v);
uint32_t gks_get_u32(const uint8_t *p);
void gks_put_u64(uint8_t *p, uint64_t v);
uint64_t gks_get_u64(const uint8_t *p);

/* A growable byte buffer: n bytes held, cap allocated, off already consumed or sent. */
typedef struct gks_buf {
    uint8_t *p;
    size_t n, cap, off;
} gks_buf;

/* These return 0, or -1 when out of memory. */
int gks_buf_reserve(gks_buf *b, size_t more);
int gks_buf_put(gks_buf *b, const void *p, size_t n);
int gks_buf_field(gks_buf *b, const void *p, size_t n);
/* Starts a frame with code (op or status), or-ing failure into *fail; returns where its length
 * goes, which gks_frame_end fills in. */
size_t gks_frame_begin(gks_buf *b, int code, int *fail);
void gks_frame_end(gks_buf *b, size_t at);

/* A reader over n bytes; each function returns 0, or -1 when the bytes are malformed. */
typedef struct gks_rd {
    const uint8_t *p;
    size_t n;
} gks_rd;

int gks_rd_field(gks_rd *r, const uint8_t **p, size_t *n);
int gks_rd_u64(gks_rd *r, uint64_t *v);
/* A key: 1..MAX_KEY bytes without NUL, copied into key[MAX_KEY + 1] as a string. */
int gks_rd_key(gks_rd *r, char *key);

/* The server: a thread listening on every address at port (0: any free one; *bound: the port). */
typedef struct gks_server gks_server;
int gks_server_start(gks_server **out, int port, double stop_wait, int *bound, gk_err *e);
/* Stops and frees it: at once (how 'n'), or when every ranked connection has closed, at most
 * stop_wait seconds from now (how 'w'); it answers requests meanwhile. */
void gks_server_stop(gks_server *sv, char how);

#endif
