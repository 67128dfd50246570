/* store.h: the rendezvous store: a small TCP key-value store (torch's TCPStore in spirit).
 * Rank 0 hosts it (a server thread inside its process, listening where gk_store_opts says);
 * every rank, rank 0 included, talks to it as a client over one connection, after a HELLO that
 * carries the job's token (the server refuses a wrong one, and a second connection of a rank). It
 * bootstraps Gloo, carries NCCL's unique id and the run's agreements (which checkpoint to resume),
 * and knows which ranks are still connected, so that a failed collective can name the rank that is
 * gone.
 * Owns: the client connection, and on rank 0 the server thread and its keys. Lifetime: open ..
 * close. Thread safety: requests from several threads take turns (the comms of a training
 * thread and of a checkpoint writer share one); the server thread is internal. */
#ifndef GK_STORE_H
#define GK_STORE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gk_store gk_store;

typedef struct gk_store_opts {
    int serve;          /* 1 (rank 0): start the server first */
    int world;          /* the job's ranks: the server refuses others and bounds what the job may
                         * hold by it (store_wire.h: values, keys, bytes, connections); 0:
                         * unknown */
    int local;          /* 1: every rank is on this machine: a loopback host is listened on */
    const char *token;  /* the job's token (NULL or "": none): the server refuses a client that
                         * does not present it; the client presents it */
    const char *token_name; /* named in the refusal's message ("GPT_DIST_TOKEN"), or NULL */
    double timeout_s;   /* connecting, and every later wait */
    const volatile sig_atomic_t *stop; /* set (by a signal handler): connecting
                                        * gives up (GK_EINTR); or NULL */
} gk_store_opts;

/* Connects to host:port as rank `rank`, retrying until timeout_s seconds have passed; serve = 1
 * (rank 0) first starts the server there (port 0: any free port, see gk_store_port). The server
 * listens at host's first address that is this machine's (loopback ones only when o->local),
 * else on every address (host is another machine's name for this one: a Kubernetes service, or
 * a loopback address for a multi-node job). Errors name the address: "rendezvous at
 * 10.0.0.1:29500: no store answered within 300 s (Connection refused)" (GK_EIO; the last
 * attempt's error in parentheses), "cannot listen on port 29500: Address already in use"
 * (GK_EIO), "rendezvous at 10.0.0.1:29500: refused: wrong or missing job token
 * (GPT_DIST_TOKEN)", "... refused: rank 1 is already connected from 10.0.0.2:41234 (pid 42);
 * refusing a second rank 1 from 10.0.0.3:39112 (pid 7)" (GK_EUSAGE). Every later wait of this
 * store is bounded by timeout_s too. Once a request fails mid-way (the store closed the
 * connection, or did not answer within the timeout), the connection is dropped and every later
 * call fails at once with that reason: "rendezvous at 10.0.0.1:29500: the store closed the
 * connection". */
int gk_store_open_opts(gk_store **out, const char *host, int port, int rank,
                       const gk_store_opts *o, gk_err *e);
/* gk_store_open_opts with no token, the world unknown and every rank local. */
int gk_store_open(gk_store **out, const char *host, int port, int serve, int rank,
                  double timeout_s, gk_err *e);
/* The port the store listens on (the one given, or the one chosen for port 0). */
int gk_store_port(const gk_store *s);
/* "host:port" ("[host]:port" when host has a colon), for messages. */
const char *gk_store_address(const gk_store *s);
/* Rank 0's: the numeric address its server listens on ("127.0.0.1"; "::" for every address);
 * NULL on other ranks. */
const char *gk_store_bound(const gk_store *s);
/* The numeric address of this end of the connection to the store ("10.0.0.2"): the address by
 * which this host reaches rank 0's, so the one to offer the other ranks when no interface is
 * named (the Gloo device binds to it). */
const char *gk_store_local_host(const gk_store *s);

/* Sets key to n bytes (keys up to 255 bytes; values up to 64 KiB and 256 bytes per rank, and
 * keys and bytes in all as store_wire.h's limits say: GK_EFORMAT "... key 'K': a value of N
 * bytes (this job's values: M at most)"). */
int gk_store_set(gk_store *s, const char *key, const void *val, size_t n, gk_err *e);
/* Waits until key exists (at most the store's timeout), then returns a malloc'd copy of its
 * value (*n bytes; the buffer has one more byte, 0, so text values are strings). Timeout:
 * GK_EIO "rendezvous at HOST:PORT: key 'K' not set within N s". */
int gk_store_get(gk_store *s, const char *key, void **val, size_t *n, gk_err *e);
/* Atomically adds delta to the integer stored at key (a missing key counts 0) and returns the
 * new value in *result (delta 0 reads it). The value is kept as decimal text ("3"), which
 * gk_store_get returns; a key that holds anything else is GK_EFORMAT "... is not an integer". */
int gk_store_add(gk_store *s, const char *key, int64_t delta, int64_t *result, gk_err *e);
/* Waits until every key exists (at most the store's timeout; the error names the first missing). */
int gk_store_wait(gk_store *s, const char *const *keys, int nkeys, gk_err *e);
/* Like gk_store_wait, for at most timeout_s seconds: 0 when every key exists, 1 when the time
 * passed first, negative on error. */
int gk_store_wait_for(gk_store *s, const char *const *keys, int nkeys, double timeout_s, gk_err *e);
/* 1 if key exists now, else 0 (no wait); negative on error. */
int gk_store_check(gk_store *s, const char *key, gk_err *e);
/* The ranks whose client connection to the server has closed (their process died or closed the
 * store) and that have no other open, in the order they left (the first is the likeliest cause
 * of a failure), up to cap of them in ranks; returns how many there are. A connection's close
 * is seen as soon as its host's kernel closes the socket (at once when the process dies); a host
 * that vanishes is only seen by TCP, much later. */
int gk_store_gone(gk_store *s, int *ranks, int cap, gk_err *e);

/* How many ranks have a connection to the store open now (negative on error). */
int gk_store_connected(gk_store *s, gk_err *e);

/* The clients the server has refused (wrong token, a second live rank of one number, a rank
 * past the job's, another protocol, too many waiting to say HELLO), kept by the server in two
 * keys of its own: their count, and the last one as "PEER: why" ("10.0.0.3:39112: wrong or
 * missing job token"). gk_store_refusals reads them: the count (0 when none), and the last
 * into last[cap] ("" when none); negative on error. */
#define GK_STORE_REFUSED "store/refused"
#define GK_STORE_REFUSED_LAST "store/refused/last"
int64_t gk_store_refusals(gk_store *s, char *last, size_t cap, gk_err *e);

/* Closes the client; on rank 0 also stops the server, after waiting (at most the timeout) until
 * every other rank's client has closed, so that no rank loses the store while it still needs it
 * (the server answers them meanwhile). Only connected ranks are waited for: one that has not
 * connected yet then finds no store. NULL: no-op. */
void gk_store_close(gk_store *s);

#ifdef __cplusplus
}
#endif

#endif
