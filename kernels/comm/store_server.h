/* store_server.h: the rendezvous store server's state, shared by its two halves: store_server.c
 * (the thread: sockets, connections, polling) and store_serve.c (the requests: keys, HELLO and
 * who may connect, the job's limits). Private to kernels/comm; see store_wire.h.
 * Owns: nothing beyond the struct's members. Thread safety: the server's thread only. */
#ifndef GK_STORE_SERVER_H
#define GK_STORE_SERVER_H

#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/comm/store_wire.h"

typedef struct kv {
    struct kv *next;
    char *key;
    uint8_t *val;
    size_t n;
} kv;

typedef struct conn {
    int fd, rank;     /* rank: -1 until its HELLO */
    int waiting, dead;
    int closing;      /* refused: dead once its reply is sent */
    long long pid;    /* its HELLO's */
    double deadline;  /* of the GET or WAIT it is waiting in; before HELLO, of the HELLO */
    char peer[INET6_ADDRSTRLEN + 8]; /* "host:port" */
    gk_store_buf in, out;
} conn;

struct gk_store_server {
    int lfd, wake[2], stopping;
    double stop_wait, stop_deadline;
    double accept_at;    /* after EMFILE: when to accept again */
    pthread_t thread;
    conn **c;
    int nc, cc;
    kv **tab;
    size_t nb, nkeys;    /* buckets (a power of 2), keys */
    size_t bytes;        /* of keys and values */
    gk_store_limits lim;
    int world;           /* ranks must be below it (0: MAX_RANK) */
    char token[MAX_TOKEN + 1];
    size_t token_n;      /* 0: any client is accepted */
    char bound[64];      /* the address listened on */
    int *live;           /* per rank: connections open after HELLO */
    uint64_t *left;      /* per rank: when its last connection closed (a departure's number) */
    uint64_t departures; /* so far */
    int nr;              /* ranks live and left have room for */
    long long refused;   /* clients refused so far */
};
typedef struct gk_store_server server;

/* store_serve.c. Answers one request (body, n bytes): 1 answered, 0 waiting, -1 malformed or out
 * of memory (the connection is dropped). */
int gk_store_serve(server *sv, conn *c, const uint8_t *body, size_t n, int expired, int *changed);
/* A refusal to c (REFUSED reason, text), after which the connection closes; counted in the
 * store's keys GK_STORE_REFUSED and GK_STORE_REFUSED_LAST (store.h). */
void gk_store_refuse(server *sv, conn *c, int reason, const char *text);
/* Books c's departure (its rank's, when it was the rank's last connection). */
void gk_store_conn_left(server *sv, conn *c);
/* Frees the keys. */
void gk_store_keys_free(server *sv);

#endif
